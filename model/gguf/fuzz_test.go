package gguf

import (
	"bytes"
	"slices"
	"testing"
	"unsafe"

	"github.com/glint-llm/glint/dtype"
)

// FuzzParse checks that Parse never panics, that every tensor it accepts lies
// inside the input, that every value decodes, and that an accepted file
// survives a trip through Writer with the same metadata and tensor bytes.
func FuzzParse(f *testing.F) {
	f.Add(sampleFile(f))
	w := NewWriter()
	must(f, w.Add("general.alignment", uint32(64)))
	must(f, w.Add("tokenizer.ggml.tokens", []string{"a", "bc", ""}))
	must(f, w.AddTensor("t", dtype.Q8_0, []int{1, 32}, randomBytes(5, 34)))
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err != nil {
		f.Fatal(err)
	}
	f.Add(buf.Bytes())
	f.Add(header(2, 0, 0).b)
	f.Add(header(3, 1e7, 1e7).raw(make([]byte, 1024)...).b)
	f.Add(header(3, 0, 1).str("general.alignment").u32(4).u32(1 << 30).b)
	for _, c := range hostileCases() {
		f.Add(c.data)
	}

	f.Fuzz(func(t *testing.T, data []byte) {
		gf, err := Parse(data)
		if err != nil {
			return
		}
		lo := uintptr(unsafe.Pointer(unsafe.SliceData(data)))
		for _, ti := range gf.Tensors {
			d, info, err := gf.TensorData(ti.Name)
			if err != nil {
				t.Fatalf("tensor %q listed but not readable: %v", ti.Name, err)
			}
			if int64(len(d)) != info.Size {
				t.Fatalf("tensor %q: %d bytes, size %d", ti.Name, len(d), info.Size)
			}
			if len(d) > 0 {
				p := uintptr(unsafe.Pointer(unsafe.SliceData(d)))
				if p < lo || p+uintptr(len(d)) > lo+uintptr(len(data)) {
					t.Fatalf("tensor %q data outside the input", ti.Name)
				}
			}
			if want, err := ti.Type.Bytes(ti.Shape()...); err != nil || int64(want) != ti.Size {
				t.Fatalf("tensor %q: size %d, dtype says %d (%v)", ti.Name, ti.Size, want, err)
			}
		}
		for _, kv := range gf.KV {
			_ = kv.Value.Any()
			_ = kv.Value.String()
			if _, ok := kv.Value.Array(); ok != (kv.Value.Type == TypeArray) {
				t.Fatalf("key %q: Array ok = %v for %v", kv.Key, ok, kv.Value.Type)
			}
		}

		w := NewWriter()
		for _, kv := range gf.KV {
			if err := w.Add(kv.Key, kv.Value); err != nil {
				return // e.g. a UINT64 alignment, which Writer refuses to write
			}
		}
		for _, ti := range gf.Tensors {
			d, _, _ := gf.TensorData(ti.Name)
			if err := w.AddTensor(ti.Name, ti.Type, ti.Shape(), d); err != nil {
				t.Fatalf("re-adding tensor %q: %v", ti.Name, err)
			}
		}
		var out bytes.Buffer
		if _, err := w.WriteTo(&out); err != nil {
			t.Fatal(err)
		}
		g2, err := Parse(out.Bytes())
		if err != nil {
			t.Fatalf("rewritten file does not parse: %v", err)
		}
		if len(g2.KV) != len(gf.KV) || len(g2.Tensors) != len(gf.Tensors) {
			t.Fatalf("rewrite has %d KV, %d tensors; want %d, %d", len(g2.KV), len(g2.Tensors), len(gf.KV), len(gf.Tensors))
		}
		for i, kv := range gf.KV {
			a, b := kv.Value.appendBody(nil), g2.KV[i].Value.appendBody(nil)
			if g2.KV[i].Key != kv.Key || g2.KV[i].Value.Type != kv.Value.Type || !bytes.Equal(a, b) {
				t.Fatalf("key %q changed in the rewrite", kv.Key)
			}
		}
		for _, ti := range gf.Tensors {
			d1, _, _ := gf.TensorData(ti.Name)
			d2, t2, err := g2.TensorData(ti.Name)
			if err != nil || t2.Type != ti.Type || !bytes.Equal(d1, d2) || !slices.Equal(t2.Dims, ti.Dims) {
				t.Fatalf("tensor %q changed in the rewrite (%v)", ti.Name, err)
			}
		}
	})
}
