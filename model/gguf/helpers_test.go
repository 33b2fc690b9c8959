package gguf

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"testing"

	"github.com/glint-llm/glint/dtype"
)

// enc builds GGUF bytes field by field, independently of Writer, so that
// tests can state the expected encoding and craft malformed files.
type enc struct{ b []byte }

func (e *enc) u8(v uint8) *enc   { e.b = append(e.b, v); return e }
func (e *enc) u16(v uint16) *enc { e.b = binary.LittleEndian.AppendUint16(e.b, v); return e }
func (e *enc) u32(v uint32) *enc { e.b = binary.LittleEndian.AppendUint32(e.b, v); return e }
func (e *enc) u64(v uint64) *enc { e.b = binary.LittleEndian.AppendUint64(e.b, v); return e }
func (e *enc) str(s string) *enc { return e.u64(uint64(len(s))).raw([]byte(s)...) }
func (e *enc) raw(b ...byte) *enc {
	e.b = append(e.b, b...)
	return e
}

// header starts a file: magic, version, tensor and KV counts.
func header(version uint32, nTensors, nKV uint64) *enc {
	e := &enc{b: []byte("GGUF")}
	return e.u32(version).u64(nTensors).u64(nKV)
}

// pad appends zeros up to a multiple of align.
func (e *enc) pad(align int) *enc {
	for len(e.b)%align != 0 {
		e.b = append(e.b, 0)
	}
	return e
}

// tensorInfo appends one tensor info (dims in ggml order).
func (e *enc) tensorInfo(name string, dims []uint64, t uint32, off uint64) *enc {
	e.str(name).u32(uint32(len(dims)))
	for _, d := range dims {
		e.u64(d)
	}
	return e.u32(t).u64(off)
}

// randomBytes returns n deterministic pseudo-random bytes.
func randomBytes(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, 1))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// sampleFile is a small valid file with one value of every type and a
// tensor of every dtype. Its last tensor's size is a multiple of the
// alignment, so the file has no trailing padding and every proper prefix of
// it is invalid.
func sampleFile(t testing.TB) []byte {
	t.Helper()
	w := NewWriter()
	for _, c := range valueCases() {
		if err := w.Add(c.key, c.in); err != nil {
			t.Fatal(err)
		}
	}
	for i, c := range tensorCases() {
		if err := w.AddTensor(c.name, c.dt, c.shape, randomBytes(uint64(i), c.size)); err != nil {
			t.Fatal(err)
		}
	}
	var b bytes.Buffer
	if _, err := w.WriteTo(&b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

type tensorCase struct {
	name  string
	dt    dtype.Type
	shape []int // row-major
	size  int   // bytes, from each format's block geometry
}

func tensorCases() []tensorCase {
	return []tensorCase{
		{"scalar", dtype.F32, []int{}, 4},
		{"f16.vec", dtype.F16, []int{7}, 14},
		{"bf16.mat", dtype.BF16, []int{3, 5}, 30},
		{"i32.3d", dtype.I32, []int{2, 3, 4}, 96},
		{"q8_0", dtype.Q8_0, []int{3, 64}, 3 * 2 * 34},
		{"q4_0.4d", dtype.Q4_0, []int{1, 2, 1, 32}, 2 * 18},
		{"empty", dtype.F32, []int{0, 8}, 0},
		{"q6_k", dtype.Q6_K, []int{2, 256}, 2 * 210},
		{"f32.last", dtype.F32, []int{4, 8}, 128},
	}
}
