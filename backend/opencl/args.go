package opencl

import (
	"fmt"
	"reflect"

	"github.com/glint-llm/glint/backend/opencl/cl"
)

// A kernel of many arguments takes them as a struct (mvfArgs): its fields in
// the order of the kernel's parameters, arrays of structs flattened (Mats[1].W
// is the parameter w1), each of a type that says how it is set. setArgs is
// the one place that turns fields into arguments; TestKernelArgs holds a
// struct to its kernel's parameter list in the .cl source, by name and type.

// localBytes is the size of a local-memory argument.
type localBytes int

var (
	memType   = reflect.TypeFor[cl.Mem]()
	localType = reflect.TypeFor[localBytes]()
)

// setArgs sets k's arguments from *args, a pointer to an arguments struct
// that the backend keeps (so that reflect.ValueOf does not allocate).
func (b *Backend) setArgs(k *kern, args any) {
	b.setFields(k, reflect.ValueOf(args).Elem(), 0)
}

// setFields sets the arguments from index i on to v's fields and returns
// the next index.
func (b *Backend) setFields(k *kern, v reflect.Value, i int) int {
	switch v.Kind() {
	case reflect.Struct:
		if v.Type() == memType {
			b.argMem(k, i, *v.Addr().Interface().(*cl.Mem))
			return i + 1
		}
		for f := range v.NumField() {
			i = b.setFields(k, v.Field(f), i)
		}
		return i
	case reflect.Array:
		for e := range v.Len() {
			i = b.setFields(k, v.Index(e), i)
		}
		return i
	}
	switch {
	case v.Type() == localType:
		b.argLocal(k, i, int(v.Int()))
	case v.Kind() == reflect.Int32:
		b.argI32(k, i, int(v.Int()))
	case v.Kind() == reflect.Uint64:
		b.argU64(k, i, int(v.Uint()))
	case v.Kind() == reflect.Float32:
		b.argF32(k, i, float32(v.Float()))
	default:
		b.fail(fmt.Errorf("opencl: %s: argument %d: no way to set a %v", k.name, i, v.Type()))
	}
	return i + 1
}
