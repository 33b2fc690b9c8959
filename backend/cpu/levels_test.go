package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/glint-llm/glint/backend/backendtest"
	"github.com/glint-llm/glint/dtype"
)

// matMulAt runs one MatMulTransposed of x (n rows) by the raw weight at
// kernel level l on a fresh backend and returns dst.
func matMulAt(t *testing.T, l simdLevel, threads int, dt dtype.Type, raw []byte, m, k, n int, x []float32) []float32 {
	t.Helper()
	b := newAt(threads, l)
	defer b.Close()
	w, err := b.Weight("w", dt, []int{m, k}, raw)
	if err != nil {
		t.Fatal(err)
	}
	xt, _ := b.Alloc(dtype.F32, n, k)
	dst, _ := b.Alloc(dtype.F32, n, m)
	if err := b.WriteF32(xt, 0, x); err != nil {
		t.Fatal(err)
	}
	b.MatMulTransposed(dst, xt, w, n)
	got := make([]float32, n*m)
	if err := b.ReadF32(dst, 0, got); err != nil {
		t.Fatal(err)
	}
	if err := b.Err(); err != nil {
		t.Fatal(err)
	}
	return got
}

// TestMatMulLevelsBitExact demands that every kernel level this CPU runs
// gives the portable Go path's bits for every output, for every weight type,
// for decode (n=1) and prefill below and above the AMX kernel's 16 tokens,
// at shapes with ragged edges: row counts that are not a multiple of the
// 4-row tiles or 32-row panels, k with a short last 256-chunk (float types),
// an odd number of 32-blocks (Q4_0/Q8_0: partial 4-block groups) or below
// the 128 where the 512-bit decode kernels start. The level's own kernel
// differs from the Go one in every accumulator layout, so equality here
// means the summation order is defined, not incidental. The activations are
// scaled per row over several orders of magnitude, so that the float64
// block sums span a wide range, and include a zero block.
func TestMatMulLevelsBitExact(t *testing.T) {
	levels := simdLevels()
	if len(levels) < 2 {
		t.Skip("only the portable kernels run on this CPU")
	}
	type shape struct{ m, k int }
	shapes := map[dtype.Type][]shape{
		dtype.F32:    {{45, 600}, {7, 37}},
		dtype.F16:    {{45, 600}, {33, 1000}},
		dtype.BF16:   {{45, 600}, {5, 300}},
		dtype.Q8_0:   {{45, 608}, {13, 96}},
		dtype.Q4_0:   {{45, 608}, {13, 96}, {70, 2048}, {64, 608}, {24, 96}, {72, 2048}},
		dtype.Q6_K:   {{45, 768}, {9, 256}},
		dtype.Q4_1:   {{45, 608}, {13, 96}},
		dtype.Q5_0:   {{45, 608}, {13, 96}},
		dtype.Q5_1:   {{45, 608}, {13, 96}},
		dtype.IQ4_NL: {{45, 608}, {13, 96}, {6, 224}},
		dtype.Q2_K:   {{45, 768}, {9, 256}},
		dtype.Q3_K:   {{45, 768}, {9, 256}},
		dtype.Q4_K:   {{45, 768}, {9, 256}},
		dtype.Q5_K:   {{45, 768}, {9, 256}},
		dtype.IQ4_XS: {{45, 768}, {9, 256}},
	}
	rng := rand.New(rand.NewPCG(21, 22))
	for _, dt := range backendtest.WeightTypes {
		for _, s := range shapes[dt] {
			raw := backendtest.RandomWeight(t, rng, dt, s.m, s.k)
			for _, n := range []int{1, 3, 17, 40} {
				x := make([]float32, n*s.k)
				for i := range n {
					scale := float32(math.Pow(10, float64(i%5)-2))
					for j := range s.k {
						x[i*s.k+j] = scale * float32(rng.NormFloat64())
					}
				}
				// A zero block: its scale is 0 and so is its contribution.
				clear(x[:min(32, s.k)])
				want := matMulAt(t, simdOff, 2, dt, raw, s.m, s.k, n, x)
				for _, l := range levels[1:] {
					t.Run(fmt.Sprintf("%v/%dx%d/n=%d/%v", dt, s.m, s.k, n, l), func(t *testing.T) {
						// One thread and two: the split of rows must not matter.
						for _, threads := range []int{1, 2} {
							got := matMulAt(t, l, threads, dt, raw, s.m, s.k, n, x)
							for i, g := range got {
								if math.Float32bits(g) != math.Float32bits(want[i]) {
									t.Fatalf("%d threads: dst[%d,%d] = %v (%#08x), go level %v (%#08x)", threads,
										i/s.m, i%s.m, g, math.Float32bits(g), want[i], math.Float32bits(want[i]))
								}
							}
						}
					})
				}
			}
		}
	}
}
