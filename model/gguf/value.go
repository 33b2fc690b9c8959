package gguf

import (
	"encoding/binary"
	"fmt"
	"math"
	"strings"
)

// ValueType is the type tag of a metadata value (gguf_type in ggml).
type ValueType uint32

// The metadata value types, numbered as in the GGUF specification.
const (
	TypeUint8   ValueType = 0
	TypeInt8    ValueType = 1
	TypeUint16  ValueType = 2
	TypeInt16   ValueType = 3
	TypeUint32  ValueType = 4
	TypeInt32   ValueType = 5
	TypeFloat32 ValueType = 6
	TypeBool    ValueType = 7
	TypeString  ValueType = 8
	TypeArray   ValueType = 9
	TypeUint64  ValueType = 10
	TypeInt64   ValueType = 11
	TypeFloat64 ValueType = 12
)

var typeNames = [...]string{
	"UINT8", "INT8", "UINT16", "INT16", "UINT32", "INT32", "FLOAT32",
	"BOOL", "STRING", "ARRAY", "UINT64", "INT64", "FLOAT64",
}

func (t ValueType) String() string {
	if int(t) < len(typeNames) {
		return typeNames[t]
	}
	return fmt.Sprintf("ValueType(%d)", uint32(t))
}

// size is the encoded size of a fixed-size value, 0 for strings and arrays,
// and -1 for unknown types.
func (t ValueType) size() int {
	switch t {
	case TypeUint8, TypeInt8, TypeBool:
		return 1
	case TypeUint16, TypeInt16:
		return 2
	case TypeUint32, TypeInt32, TypeFloat32:
		return 4
	case TypeUint64, TypeInt64, TypeFloat64:
		return 8
	case TypeString, TypeArray:
		return 0
	}
	return -1
}

func (t ValueType) integer() bool {
	switch t {
	case TypeUint8, TypeInt8, TypeUint16, TypeInt16, TypeUint32, TypeInt32, TypeUint64, TypeInt64:
		return true
	}
	return false
}

func (t ValueType) signed() bool {
	return t == TypeInt8 || t == TypeInt16 || t == TypeInt32 || t == TypeInt64
}

// Value is one metadata value. Scalars are held decoded; an array keeps its
// elements in their file encoding (in memory owned by the Value, never the
// mapped file, so a Value outlives File.Close) and decodes them on request,
// which keeps a 128k-entry token list to one allocation while parsing.
type Value struct {
	Type ValueType
	Elem ValueType // element type when Type is TypeArray

	bits uint64 // fixed-size scalar: its little-endian bytes, zero-extended
	str  string // TypeString
	n    int    // array length
	raw  []byte // array elements as encoded in the file
}

// KV is one metadata key-value pair, in file order.
type KV struct {
	Key   string
	Value Value
}

// Uint returns an integer value that is not negative.
func (v Value) Uint() (uint64, bool) {
	if !v.Type.integer() {
		return 0, false
	}
	if v.Type.signed() {
		i, _ := v.Int()
		if i < 0 {
			return 0, false
		}
		return uint64(i), true
	}
	return v.bits, true
}

// Int returns an integer value that fits in an int64.
func (v Value) Int() (int64, bool) {
	switch v.Type {
	case TypeInt8:
		return int64(int8(v.bits)), true
	case TypeInt16:
		return int64(int16(v.bits)), true
	case TypeInt32:
		return int64(int32(v.bits)), true
	case TypeInt64:
		return int64(v.bits), true
	case TypeUint8, TypeUint16, TypeUint32, TypeUint64:
		if v.bits > math.MaxInt64 {
			return 0, false
		}
		return int64(v.bits), true
	}
	return 0, false
}

// Float returns a floating-point value; integers convert too, since writers
// disagree on whether e.g. a frequency base is stored as an integer.
func (v Value) Float() (float64, bool) {
	switch v.Type {
	case TypeFloat32:
		return float64(math.Float32frombits(uint32(v.bits))), true
	case TypeFloat64:
		return math.Float64frombits(v.bits), true
	}
	if v.Type.signed() {
		i, _ := v.Int()
		return float64(i), true
	}
	if v.Type.integer() {
		return float64(v.bits), true
	}
	return 0, false
}

// Bool returns a BOOL value (any non-zero byte is true, as in ggml).
func (v Value) Bool() (bool, bool) {
	if v.Type != TypeBool {
		return false, false
	}
	return v.bits != 0, true
}

// Str returns a STRING value.
func (v Value) Str() (string, bool) {
	if v.Type != TypeString {
		return "", false
	}
	return v.str, true
}

// Len is the number of elements of an array (0 for other values).
func (v Value) Len() int { return v.n }

// Strings returns the elements of an array of STRING. The strings share one
// allocation, so a 128k-token vocabulary costs two allocations, not 128k.
func (v Value) Strings() ([]string, bool) {
	if v.Type != TypeArray || v.Elem != TypeString {
		return nil, false
	}
	all := string(v.raw)
	out := make([]string, v.n)
	off := 0
	for i := range out {
		l := int(binary.LittleEndian.Uint64(v.raw[off:]))
		off += 8
		out[i] = all[off : off+l]
		off += l
	}
	return out, true
}

// Float32s returns the elements of an array of FLOAT32 (or of FLOAT64,
// rounded to float32).
func (v Value) Float32s() ([]float32, bool) {
	if v.Type != TypeArray {
		return nil, false
	}
	out := make([]float32, v.n)
	switch v.Elem {
	case TypeFloat32:
		for i := range out {
			out[i] = math.Float32frombits(binary.LittleEndian.Uint32(v.raw[4*i:]))
		}
	case TypeFloat64:
		for i := range out {
			out[i] = float32(math.Float64frombits(binary.LittleEndian.Uint64(v.raw[8*i:])))
		}
	default:
		return nil, false
	}
	return out, true
}

// Int32s returns the elements of an array of integers of any width, provided
// every element fits in an int32.
func (v Value) Int32s() ([]int32, bool) {
	if v.Type != TypeArray || !v.Elem.integer() {
		return nil, false
	}
	out := make([]int32, v.n)
	for i := range out {
		e := v.elem(i)
		x, ok := e.Int()
		if !ok || x < math.MinInt32 || x > math.MaxInt32 {
			return nil, false
		}
		out[i] = int32(x)
	}
	return out, true
}

// elem decodes element i of an array of a fixed-size type.
func (v Value) elem(i int) Value {
	sz := v.Elem.size()
	b := v.raw[i*sz : (i+1)*sz]
	var bits uint64
	for j := sz - 1; j >= 0; j-- {
		bits = bits<<8 | uint64(b[j])
	}
	return Value{Type: v.Elem, bits: bits}
}

// Array returns the elements of an array as Values (nested arrays included).
func (v Value) Array() ([]Value, bool) {
	if v.Type != TypeArray {
		return nil, false
	}
	return v.head(v.n), true
}

// head decodes the first k elements of an array. String shows a few
// without decoding the rest: a Value is some 70 bytes, so decoding a
// 100M-element UINT8 array whole would take 70 times the file.
func (v Value) head(k int) []Value {
	out := make([]Value, min(k, v.n))
	switch v.Elem {
	case TypeString:
		off := 0
		for i := range out {
			l := int(binary.LittleEndian.Uint64(v.raw[off:]))
			off += 8
			out[i] = Value{Type: TypeString, str: string(v.raw[off : off+l])}
			off += l
		}
	case TypeArray:
		r := reader{buf: v.raw}
		for i := range out {
			// The encoding was validated when the Value was made, so these
			// reads cannot fail.
			a, err := r.array(1)
			if err != nil {
				return out[:i]
			}
			out[i] = a
		}
	default:
		for i := range out {
			out[i] = v.elem(i)
		}
	}
	return out
}

// Any returns the value as a Go value of the matching type: uint8 … float64,
// bool, string; arrays as []uint8 … []float64, []bool, []string, and nested
// arrays as []any.
func (v Value) Any() any {
	switch v.Type {
	case TypeUint8:
		return uint8(v.bits)
	case TypeInt8:
		return int8(v.bits)
	case TypeUint16:
		return uint16(v.bits)
	case TypeInt16:
		return int16(v.bits)
	case TypeUint32:
		return uint32(v.bits)
	case TypeInt32:
		return int32(v.bits)
	case TypeUint64:
		return v.bits
	case TypeInt64:
		return int64(v.bits)
	case TypeFloat32:
		return math.Float32frombits(uint32(v.bits))
	case TypeFloat64:
		return math.Float64frombits(v.bits)
	case TypeBool:
		return v.bits != 0
	case TypeString:
		return v.str
	case TypeArray:
		return v.anyArray()
	}
	return nil
}

func (v Value) anyArray() any {
	switch v.Elem {
	case TypeString:
		s, _ := v.Strings()
		return s
	case TypeArray:
		a, _ := v.Array()
		out := make([]any, len(a))
		for i, e := range a {
			out[i] = e.Any()
		}
		return out
	}
	return fillSlice(v, v.Elem)
}

func fillSlice(v Value, t ValueType) any {
	switch t {
	case TypeUint8:
		return slice[uint8](v)
	case TypeInt8:
		return slice[int8](v)
	case TypeUint16:
		return slice[uint16](v)
	case TypeInt16:
		return slice[int16](v)
	case TypeUint32:
		return slice[uint32](v)
	case TypeInt32:
		return slice[int32](v)
	case TypeUint64:
		return slice[uint64](v)
	case TypeInt64:
		return slice[int64](v)
	case TypeFloat32:
		return slice[float32](v)
	case TypeFloat64:
		return slice[float64](v)
	case TypeBool:
		return slice[bool](v)
	}
	return nil
}

func slice[T any](v Value) []T {
	out := make([]T, v.n)
	for i := range out {
		out[i] = v.elem(i).Any().(T)
	}
	return out
}

// String formats the value for people: strings as they are, arrays with
// their first few elements.
func (v Value) String() string {
	switch v.Type {
	case TypeString:
		return v.str
	case TypeArray:
		const show = 8
		var b strings.Builder
		b.WriteString("[")
		a := v.head(show + 1)
		for i, e := range a {
			if i == show {
				fmt.Fprintf(&b, " … (%d %v)", v.n, v.Elem)
				break
			}
			if i > 0 {
				b.WriteString(" ")
			}
			if e.Type == TypeString {
				fmt.Fprintf(&b, "%q", e.str)
			} else {
				b.WriteString(e.String())
			}
		}
		b.WriteString("]")
		return b.String()
	}
	return fmt.Sprint(v.Any())
}

// describe names a value's type for error messages ("ARRAY of STRING").
func (v Value) describe() string {
	if v.Type == TypeArray {
		return fmt.Sprintf("ARRAY of %v", v.Elem)
	}
	return v.Type.String()
}

// NewValue converts a Go value to a metadata value: string, bool, uint8 …
// uint64, int8 … int64, float32, float64, slices of those, []Value (an
// array of arrays or of scalars, all of one type) and Value itself. Plain
// int and uint are refused: the width is part of the format (llama.cpp
// rejects an INT32 where it wants a UINT32), so callers say which they mean.
func NewValue(x any) (Value, error) {
	switch x := x.(type) {
	case Value:
		return x, x.check()
	case uint8:
		return Value{Type: TypeUint8, bits: uint64(x)}, nil
	case int8:
		return Value{Type: TypeInt8, bits: uint64(uint8(x))}, nil
	case uint16:
		return Value{Type: TypeUint16, bits: uint64(x)}, nil
	case int16:
		return Value{Type: TypeInt16, bits: uint64(uint16(x))}, nil
	case uint32:
		return Value{Type: TypeUint32, bits: uint64(x)}, nil
	case int32:
		return Value{Type: TypeInt32, bits: uint64(uint32(x))}, nil
	case uint64:
		return Value{Type: TypeUint64, bits: x}, nil
	case int64:
		return Value{Type: TypeInt64, bits: uint64(x)}, nil
	case float32:
		return Value{Type: TypeFloat32, bits: uint64(math.Float32bits(x))}, nil
	case float64:
		return Value{Type: TypeFloat64, bits: math.Float64bits(x)}, nil
	case bool:
		var b uint64
		if x {
			b = 1
		}
		return Value{Type: TypeBool, bits: b}, nil
	case string:
		return Value{Type: TypeString, str: x}, nil
	case []uint8:
		return arrayOf(TypeUint8, x), nil
	case []int8:
		return arrayOf(TypeInt8, x), nil
	case []uint16:
		return arrayOf(TypeUint16, x), nil
	case []int16:
		return arrayOf(TypeInt16, x), nil
	case []uint32:
		return arrayOf(TypeUint32, x), nil
	case []int32:
		return arrayOf(TypeInt32, x), nil
	case []uint64:
		return arrayOf(TypeUint64, x), nil
	case []int64:
		return arrayOf(TypeInt64, x), nil
	case []float32:
		return arrayOf(TypeFloat32, x), nil
	case []float64:
		return arrayOf(TypeFloat64, x), nil
	case []bool:
		return arrayOf(TypeBool, x), nil
	case []string:
		return arrayOf(TypeString, x), nil
	case []Value:
		return valueArray(x)
	}
	return Value{}, fmt.Errorf("gguf: cannot store a %T as a metadata value (use a sized type)", x)
}

func arrayOf[T any](t ValueType, xs []T) Value {
	v := Value{Type: TypeArray, Elem: t, n: len(xs), raw: []byte{}}
	for _, x := range xs {
		e, _ := NewValue(x)
		v.raw = e.appendBody(v.raw)
	}
	return v
}

func valueArray(xs []Value) (Value, error) {
	if len(xs) == 0 {
		return Value{}, fmt.Errorf("gguf: empty []Value has no element type (use a typed empty slice)")
	}
	v := Value{Type: TypeArray, Elem: xs[0].Type, n: len(xs), raw: []byte{}}
	for i, e := range xs {
		if e.Type != v.Elem {
			return Value{}, fmt.Errorf("gguf: []Value element %d is %v, element 0 is %v", i, e.Type, v.Elem)
		}
		v.raw = e.appendBody(v.raw)
	}
	// Re-reading the encoding enforces the parser's limits (unknown types,
	// nesting depth), so the writer cannot make a file the reader refuses.
	r := reader{buf: v.raw}
	if err := r.skipArray(v.Elem, uint64(v.n), 1); err != nil {
		return Value{}, fmt.Errorf("gguf: []Value: %w", err)
	}
	return v, nil
}

// appendBody appends the value's encoding without its type tag: what
// follows the type in a KV pair, and what an array element is.
func (v Value) appendBody(b []byte) []byte {
	switch v.Type {
	case TypeString:
		b = binary.LittleEndian.AppendUint64(b, uint64(len(v.str)))
		return append(b, v.str...)
	case TypeArray:
		b = binary.LittleEndian.AppendUint32(b, uint32(v.Elem))
		b = binary.LittleEndian.AppendUint64(b, uint64(v.n))
		return append(b, v.raw...)
	}
	for i := 0; i < v.Type.size(); i++ {
		b = append(b, byte(v.bits>>(8*i)))
	}
	return b
}

// check reports whether v, which may have been built by hand from its
// exported fields, has an encoding the reader accepts.
func (v Value) check() error {
	if v.Type.size() < 0 {
		return fmt.Errorf("gguf: value of unknown type %v", v.Type)
	}
	if v.Type == TypeArray {
		r := reader{buf: v.raw}
		if err := r.skipArray(v.Elem, uint64(v.n), 1); err != nil {
			return fmt.Errorf("gguf: array value: %w", err)
		}
		if r.off != len(r.buf) {
			return fmt.Errorf("gguf: array value: %d stray bytes after %d elements", len(r.buf)-r.off, v.n)
		}
	}
	return nil
}
