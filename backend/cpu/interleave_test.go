package cpu

import (
	"bytes"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/glint-llm/glint/backend/backendtest"
	"github.com/glint-llm/glint/dtype"
)

// TestInterleaveQ4_0 checks that the interleaved layout keeps every byte:
// each row read back from it (rowQ4_0x8) is the file's row.
func TestInterleaveQ4_0(t *testing.T) {
	const m, k = 24, 96
	rng := rand.New(rand.NewPCG(3, 4))
	raw := backendtest.RandomWeight(t, rng, dtype.Q4_0, m, k)
	rowBytes, _ := dtype.Q4_0.RowBytes(k)
	x8 := make([]byte, len(raw))
	interleaveQ4_0(x8, raw, rowBytes, 0, m/q4x8Rows)
	if bytes.Equal(x8, raw) {
		t.Fatal("the interleaved weight is the file's layout")
	}
	row := make([]byte, rowBytes)
	for r := range m {
		rowQ4_0x8(row, x8, rowBytes, r)
		if want := raw[r*rowBytes : (r+1)*rowBytes]; !bytes.Equal(row, want) {
			t.Fatalf("row %d: got % x, want % x", r, row, want)
		}
	}
}

// TestInterleavedWeightOps checks the ops that read a weight's rows other
// than the matmul (TestMatMulLevelsBitExact has those) on the levels that
// interleave Q4_0: Embedding from the weight, and Embedding and MatMulTransposed
// from a tensor that holds the same rows in the file's layout, all against
// the portable level.
func TestInterleavedWeightOps(t *testing.T) {
	const m, k, n = 16, 64, 3
	rng := rand.New(rand.NewPCG(5, 6))
	raw := backendtest.RandomWeight(t, rng, dtype.Q4_0, m, k)
	x := make([]float32, n*k)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	ids := []int32{5, 0, 15}
	run := func(l simdLevel) (embed, copied, mm []float32) {
		b := newAt(2, l)
		defer b.Close()
		w, err := b.Weight("w", dtype.Q4_0, []int{m, k}, raw)
		if err != nil {
			t.Fatal(err)
		}
		if want := interleavesQ4_0(l, dtype.Q4_0, []int{m, k}); w.(*Tensor).x8 != want {
			t.Fatalf("level %v: weight interleaved %v, want %v", l, w.(*Tensor).x8, want)
		}
		// The same rows in the file's layout, which no op writes: the
		// bytes go straight into an allocated tensor.
		c, _ := b.Alloc(dtype.Q4_0, m, k)
		copy(c.(*Tensor).data, raw)
		it, _ := b.Alloc(dtype.I32, n)
		xt, _ := b.Alloc(dtype.F32, n, k)
		e1, _ := b.Alloc(dtype.F32, n, k)
		e2, _ := b.Alloc(dtype.F32, n, k)
		d, _ := b.Alloc(dtype.F32, n, m)
		_ = b.WriteI32(it, 0, ids)
		_ = b.WriteF32(xt, 0, x)
		b.Embedding(e1, w, it, n)
		b.Embedding(e2, c, it, n)
		b.MatMulTransposed(d, xt, c, n)
		embed, copied, mm = make([]float32, n*k), make([]float32, n*k), make([]float32, n*m)
		_ = b.ReadF32(e1, 0, embed)
		_ = b.ReadF32(e2, 0, copied)
		_ = b.ReadF32(d, 0, mm)
		if err := b.Err(); err != nil {
			t.Fatalf("level %v: %v", l, err)
		}
		return embed, copied, mm
	}
	we, wc, wm := run(simdOff)
	tested := false
	for _, l := range simdLevels()[1:] {
		tested = tested || interleavesQ4_0(l, dtype.Q4_0, []int{m, k})
		ge, gc, gm := run(l)
		for _, c := range []struct {
			what      string
			got, want []float32
		}{{"Embedding", ge, we}, {"Embedding of the file layout", gc, wc}, {"MatMulTransposed by the file layout", gm, wm}} {
			for i := range c.want {
				if math.Float32bits(c.got[i]) != math.Float32bits(c.want[i]) {
					t.Fatalf("level %v: %s [%d] = %v, portable %v", l, c.what, i, c.got[i], c.want[i])
				}
			}
		}
	}
	if !tested {
		t.Skip("no kernel level of this CPU interleaves Q4_0 (AVX2 or AVX-512 without VNNI)")
	}
}

// BenchmarkInterleaveQ4_0 times the load-time rewrite of a decode-sized
// weight (one thread).
func BenchmarkInterleaveQ4_0(b *testing.B) {
	const m, k = 8192, 2048
	rowBytes, _ := dtype.Q4_0.RowBytes(k)
	src := make([]byte, m*rowBytes)
	dst := make([]byte, len(src))
	b.SetBytes(int64(len(src)))
	for range b.N {
		interleaveQ4_0(dst, src, rowBytes, 0, m/q4x8Rows)
	}
}
