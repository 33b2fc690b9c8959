package opencl

import (
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/glint-llm/glint/backend/opencl/cl"
	"github.com/glint-llm/glint/kernels"
)

// param is a kernel parameter: its name, lower-cased, and how it is set
// ("mem", "local", "int", "ulong", "float").
type param struct{ name, kind string }

// kernelParams parses the parameter list of the kernel whose declaration
// starts with decl ("kernel void mvf_##T(") from the sources.
func kernelParams(t *testing.T, decl string) []param {
	t.Helper()
	var src string
	for _, f := range kernels.Files() {
		if i := strings.Index(f.Text, decl); i >= 0 {
			src = f.Text[i+len(decl):]
			break
		}
	}
	end := strings.Index(src, ")")
	if end < 0 {
		t.Fatalf("no kernel %q in the sources", decl)
	}
	var ps []param
	for _, p := range strings.Split(strings.ReplaceAll(src[:end], "\\", " "), ",") {
		words := strings.Fields(strings.ReplaceAll(p, "*", " * "))
		if len(words) < 2 {
			t.Fatalf("%s: parameter %q", decl, p)
		}
		kind := words[len(words)-2]
		switch {
		case words[0] == "local":
			kind = "local"
		case words[0] == "global" || kind == "*":
			kind = "mem"
		}
		ps = append(ps, param{strings.ToLower(words[len(words)-1]), kind})
	}
	return ps
}

// structParams lists the arguments setArgs passes from a struct of type
// typ: its fields in order, arrays of structs flattened with the element's
// index after each field's name (Mats[1].W is w1).
func structParams(t *testing.T, typ reflect.Type, suffix string) []param {
	t.Helper()
	var ps []param
	for f := range typ.NumField() {
		sf := typ.Field(f)
		name := strings.ToLower(sf.Name) + suffix
		switch ft := sf.Type; {
		case ft == reflect.TypeFor[cl.Mem]():
			ps = append(ps, param{name, "mem"})
		case ft == reflect.TypeFor[localBytes]():
			ps = append(ps, param{name, "local"})
		case ft.Kind() == reflect.Int32:
			ps = append(ps, param{name, "int"})
		case ft.Kind() == reflect.Uint64:
			ps = append(ps, param{name, "ulong"})
		case ft.Kind() == reflect.Float32:
			ps = append(ps, param{name, "float"})
		case ft.Kind() == reflect.Array && ft.Elem().Kind() == reflect.Struct:
			for e := range ft.Len() {
				ps = append(ps, structParams(t, ft.Elem(), suffix+strconv.Itoa(e))...)
			}
		default:
			t.Fatalf("%v.%s: setArgs sets no %v", typ, sf.Name, ft)
		}
	}
	return ps
}

// TestKernelArgs holds the argument structs to their kernels' parameter
// lists in the OpenCL sources: the same names, in the same order, each of
// the type its field sets.
func TestKernelArgs(t *testing.T) {
	for _, tc := range []struct {
		decl string
		args reflect.Type
	}{
		{"kernel void mvf_##T(", reflect.TypeFor[mvfArgs]()},
	} {
		want := kernelParams(t, tc.decl)
		got := structParams(t, tc.args, "")
		if !slices.Equal(got, want) {
			t.Errorf("%v sets\n%v\nbut %s takes\n%v", tc.args, got, tc.decl, want)
		}
	}
}

// TestFusions checks the declared fusions: neighbouring stages take no
// kind in common (match takes each stage's steps greedily), maxSteps is
// the longest, every fusion's fullest chain fills it, and the Llama
// step's chains are what they should be: held, filled and launched, or
// refused.
func TestFusions(t *testing.T) {
	longest := 0
	for i, f := range fusions {
		n := 0
		for s := range f {
			if s > 0 && f[s-1].kinds&f[s].kinds != 0 {
				t.Errorf("fusion %d: stages %d and %d share kinds", i, s-1, s)
			}
			if f[s].min > f[s].max || f[s].max == 0 {
				t.Errorf("fusion %d stage %d: min %d, max %d", i, s, f[s].min, f[s].max)
			}
			n += f[s].max
		}
		longest = max(longest, n)
	}
	if longest != maxSteps {
		t.Errorf("the longest fusion takes %d steps, maxSteps is %d", longest, maxSteps)
	}
	N, M, R, C, S, A := stepNorm, stepMatMul, stepRoPE, stepStore, stepSiLUMul, stepAdd
	for _, tc := range []struct {
		held      []stepKind
		next      stepKind
		ok, fills bool
	}{
		{nil, N, true, false},
		{nil, M, true, false},
		{[]stepKind{N}, M, true, false},
		{[]stepKind{N}, N, false, false},
		{[]stepKind{N}, R, false, false},
		{[]stepKind{N, M, M}, M, true, false},
		{[]stepKind{N, M, M, M}, M, false, false},
		{[]stepKind{N, M, M, M}, R, true, false},
		{[]stepKind{N, M, M, M, R, R, C}, C, true, false},
		{[]stepKind{N, M, M, M, R, C, R, C, R}, C, true, true},
		{[]stepKind{N, M, M, M, R}, M, false, false},
		{[]stepKind{N, M, M}, S, true, true},
		{[]stepKind{N, M}, S, false, false},
		{[]stepKind{N, M, M, M}, S, false, false},
		{[]stepKind{M}, A, true, true},
		{[]stepKind{N, M}, A, true, true},
		{[]stepKind{M, M}, A, false, false},
		{[]stepKind{M, R}, A, false, false},
	} {
		ok, fills := follows(tc.held, tc.next)
		if ok != tc.ok || fills != tc.fills {
			t.Errorf("%v then %v: follows %v, fills %v; want %v, %v", tc.held, tc.next, ok, fills, tc.ok, tc.fills)
		}
	}
}
