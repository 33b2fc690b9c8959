package gguf

import (
	"bytes"
	"math"
	"reflect"
	"strings"
	"testing"
)

type valueCase struct {
	key  string
	in   any
	typ  ValueType
	elem ValueType
}

func nested(t testing.TB) Value {
	a, err := NewValue([]int32{1, -2, 3})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := NewValue([]int32{})
	v, err := NewValue([]Value{a, b})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func valueCases() []valueCase {
	s1, _ := NewValue([]string{"x", ""})
	s2, _ := NewValue([]string{"héllo"})
	inner, _ := NewValue([]Value{s1, s2})
	deep, _ := NewValue([]Value{inner, inner})
	return []valueCase{
		{"u8", uint8(200), TypeUint8, 0},
		{"i8", int8(-100), TypeInt8, 0},
		{"u16", uint16(65535), TypeUint16, 0},
		{"i16", int16(-32768), TypeInt16, 0},
		{"u32", uint32(4294967295), TypeUint32, 0},
		{"i32", int32(-7), TypeInt32, 0},
		{"f32", float32(1e-5), TypeFloat32, 0},
		{"bool.t", true, TypeBool, 0},
		{"bool.f", false, TypeBool, 0},
		{"str", "Once upon a time ▁ 🦙", TypeString, 0},
		{"str.empty", "", TypeString, 0},
		{"u64", uint64(math.MaxUint64), TypeUint64, 0},
		{"i64", int64(math.MinInt64), TypeInt64, 0},
		{"f64", -2.5e300, TypeFloat64, 0},
		{"a.u8", []uint8{0, 1, 255}, TypeArray, TypeUint8},
		{"a.i8", []int8{-128, 0, 127}, TypeArray, TypeInt8},
		{"a.u16", []uint16{1, 65535}, TypeArray, TypeUint16},
		{"a.i16", []int16{-1, 2}, TypeArray, TypeInt16},
		{"a.u32", []uint32{0, 4294967295}, TypeArray, TypeUint32},
		{"a.i32", []int32{-2147483648, 2147483647}, TypeArray, TypeInt32},
		{"a.f32", []float32{0.5, -1, float32(math.Inf(1))}, TypeArray, TypeFloat32},
		{"a.bool", []bool{true, false, true}, TypeArray, TypeBool},
		{"a.str", []string{"<unk>", "", "Ġ Ġ"}, TypeArray, TypeString},
		{"a.u64", []uint64{math.MaxUint64}, TypeArray, TypeUint64},
		{"a.i64", []int64{math.MinInt64, -1}, TypeArray, TypeInt64},
		{"a.f64", []float64{math.Pi}, TypeArray, TypeFloat64},
		{"a.empty", []float32{}, TypeArray, TypeFloat32},
		{"a.nested", []Value{inner}, TypeArray, TypeArray},
		{"a.deep", []Value{deep}, TypeArray, TypeArray},
	}
}

// wantAny is what Any should return for a case's input.
func wantAny(t *testing.T, in any) any {
	if vs, ok := in.([]Value); ok {
		out := make([]any, len(vs))
		for i, v := range vs {
			out[i] = v.Any()
		}
		return out
	}
	return in
}

func TestValueRoundTrip(t *testing.T) {
	f, err := Parse(sampleFile(t))
	if err != nil {
		t.Fatal(err)
	}
	cases := valueCases()
	if len(f.KV) != len(cases) {
		t.Fatalf("%d KV pairs, want %d", len(f.KV), len(cases))
	}
	for i, c := range cases {
		t.Run(c.key, func(t *testing.T) {
			kv := f.KV[i]
			if kv.Key != c.key {
				t.Fatalf("pair %d is %q, want %q (file order)", i, kv.Key, c.key)
			}
			v, ok := f.Get(c.key)
			if !ok || v.Type != c.typ || (c.typ == TypeArray && v.Elem != c.elem) {
				t.Fatalf("Get = %v %v/%v, want %v/%v", ok, v.Type, v.Elem, c.typ, c.elem)
			}
			if got, want := v.Any(), wantAny(t, c.in); !reflect.DeepEqual(got, want) {
				t.Errorf("Any = %#v, want %#v", got, want)
			}
		})
	}
	// Deeper structure of a nested array through Array.
	v, _ := f.Get("a.deep")
	outer, _ := v.Array()
	mid, _ := outer[0].Array()
	inner, _ := mid[1].Array()
	s, ok := inner[1].Strings()
	if len(outer) != 1 || len(mid) != 2 || len(inner) != 2 || !ok || !reflect.DeepEqual(s, []string{"héllo"}) {
		t.Errorf("a.deep: got %v", v)
	}
}

// TestWriterEncoding checks the writer's bytes against an encoding written
// out field by field from the GGUF specification.
func TestWriterEncoding(t *testing.T) {
	w := NewWriter()
	must(t, w.Add("general.architecture", "llama"))
	must(t, w.Add("n", uint32(5)))
	must(t, w.Add("eps", float32(1)))
	must(t, w.Add("neg", int16(-2)))
	must(t, w.Add("ok", true))
	must(t, w.Add("toks", []string{"a", "bc"}))
	must(t, w.Add("nest", nested(t)))
	must(t, w.AddTensor("w", 0, []int{2, 3}, randomBytes(1, 24)))
	must(t, w.AddTensor("b", 1, []int{3}, randomBytes(2, 6)))
	var got bytes.Buffer
	if _, err := w.WriteTo(&got); err != nil {
		t.Fatal(err)
	}

	e := header(3, 2, 7)
	e.str("general.architecture").u32(8).str("llama")
	e.str("n").u32(4).u32(5)
	e.str("eps").u32(6).u32(0x3f800000)
	e.str("neg").u32(3).u16(0xfffe)
	e.str("ok").u32(7).u8(1)
	e.str("toks").u32(9).u32(8).u64(2).str("a").str("bc")
	e.str("nest").u32(9).u32(9).u64(2).
		u32(5).u64(3).u32(1).u32(0xfffffffe).u32(3).
		u32(5).u64(0)
	e.tensorInfo("w", []uint64{3, 2}, 0, 0)
	e.tensorInfo("b", []uint64{3}, 1, 32)
	e.pad(32).raw(randomBytes(1, 24)...).pad(32).raw(randomBytes(2, 6)...).pad(32)
	if !bytes.Equal(got.Bytes(), e.b) {
		t.Fatalf("writer output differs from the hand encoding:\n got %x\nwant %x", got.Bytes(), e.b)
	}
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestValueAccessors(t *testing.T) {
	val := func(x any) Value {
		v, err := NewValue(x)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	type res struct {
		u     uint64
		uok   bool
		i     int64
		iok   bool
		f     float64
		fok   bool
		i32s  []int32
		i32ok bool
	}
	cases := []struct {
		name string
		v    Value
		want res
	}{
		{"u8", val(uint8(7)), res{7, true, 7, true, 7, true, nil, false}},
		{"i8 negative", val(int8(-1)), res{0, false, -1, true, -1, true, nil, false}},
		{"i64 min", val(int64(math.MinInt64)), res{0, false, math.MinInt64, true, -9.223372036854775808e18, true, nil, false}},
		{"u64 max", val(uint64(math.MaxUint64)), res{math.MaxUint64, true, 0, false, 1.8446744073709552e19, true, nil, false}},
		{"f32", val(float32(0.25)), res{0, false, 0, false, 0.25, true, nil, false}},
		{"string", val("3"), res{}},
		{"bool", val(true), res{}},
		{"[]uint8", val([]uint8{1, 255}), res{i32s: []int32{1, 255}, i32ok: true}},
		{"[]int64 fits", val([]int64{-5, 1 << 30}), res{i32s: []int32{-5, 1 << 30}, i32ok: true}},
		{"[]int64 too big", val([]int64{1 << 31}), res{}},
		{"[]uint32 too big", val([]uint32{math.MaxUint32}), res{}},
		{"[]float32", val([]float32{1}), res{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var got res
			got.u, got.uok = c.v.Uint()
			got.i, got.iok = c.v.Int()
			got.f, got.fok = c.v.Float()
			got.i32s, got.i32ok = c.v.Int32s()
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("got %+v, want %+v", got, c.want)
			}
		})
	}

	if b, ok := val(false).Bool(); !ok || b {
		t.Errorf("Bool(false) = %v, %v", b, ok)
	}
	if _, ok := val(uint8(1)).Bool(); ok {
		t.Error("Bool accepted a UINT8")
	}
	if s, ok := val("x").Str(); !ok || s != "x" {
		t.Errorf("Str = %q, %v", s, ok)
	}
	if _, ok := val([]string{"x"}).Str(); ok {
		t.Error("Str accepted an array")
	}
	if f, ok := val([]float64{0.5, 1e300}).Float32s(); !ok || f[0] != 0.5 || !math.IsInf(float64(f[1]), 1) {
		t.Errorf("Float32s of FLOAT64 = %v, %v", f, ok)
	}
	if _, ok := val([]int32{1}).Float32s(); ok {
		t.Error("Float32s accepted INT32 elements")
	}
	if _, ok := val([]int32{1}).Strings(); ok {
		t.Error("Strings accepted INT32 elements")
	}
	if _, ok := val("x").Array(); ok {
		t.Error("Array accepted a string")
	}
	if got := val([]string{"a", "b"}).String(); got != `["a" "b"]` {
		t.Errorf("String = %s", got)
	}
	long := val(make([]uint8, 100)).String()
	if !strings.HasSuffix(long, "… (100 UINT8)]") {
		t.Errorf("String of a long array = %s", long)
	}
}

func TestNewValueErrors(t *testing.T) {
	i32, _ := NewValue([]int32{1})
	deep := i32
	for range maxDepth {
		d, err := NewValue([]Value{deep})
		if err != nil {
			break
		}
		deep = d
	}
	cases := []struct {
		name string
		in   any
		want string
	}{
		{"int", 3, "cannot store a int"},
		{"uint", uint(3), "cannot store a uint"},
		{"[]int", []int{3}, "cannot store a []int"},
		{"map", map[string]int{}, "cannot store a map"},
		{"empty []Value", []Value{}, "no element type"},
		{"mixed []Value", []Value{i32, {Type: TypeString}}, "element 1 is STRING"},
		{"too deep", []Value{deep}, "nested more than 8 deep"},
		{"bad type", Value{Type: 13}, "unknown type ValueType(13)"},
		{"bad elem", Value{Type: TypeArray, Elem: 42}, "unknown element type 42"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := NewValue(c.in)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want it to contain %q", err, c.want)
			}
		})
	}
	if _, err := NewValue(Value{Type: TypeArray, Elem: TypeString}); err != nil {
		t.Errorf("zero-length array Value: %v", err)
	}
}
