//go:build cgo && amd64

package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/glint-llm/glint/backend/backendtest"
	"github.com/glint-llm/glint/dtype"
)

// TestAMXMatchesVNNI runs prefill matmuls through the AMX kernel and through
// the VNNI tiles it replaces. Both compute every block's integer dot product
// exactly and scale it the same way; only the order of the float sums
// differs, so results agree to a few float32 ulps of the sum of the terms'
// magnitudes (the bound below: 1e-5 of Σ|terms|).
func TestAMXMatchesVNNI(t *testing.T) {
	if hostSIMD < simdAMX {
		t.Skip("no AMX on this CPU (or the OS refused the tile state)")
	}
	rng := rand.New(rand.NewPCG(7, 8))
	for _, dt := range []dtype.Type{dtype.Q4_0, dtype.Q8_0} {
		for _, s := range []struct{ n, m, k int }{{16, 32, 64}, {17, 45, 96}, {33, 70, 2048}, {128, 64, 512}, {40, 7, 32}} {
			t.Run(fmt.Sprintf("%v/n=%d/m=%d/k=%d", dt, s.n, s.m, s.k), func(t *testing.T) {
				raw := backendtest.RandomWeight(t, rng, dt, s.m, s.k)
				x := make([]float32, s.n*s.k)
				for i := range x {
					x[i] = float32(rng.NormFloat64())
				}
				var a acts
				a.grow(dt.ActivationType(), s.n, s.k)
				quantizeRowsGo(dt.ActivationType(), actOffset(dt), &a, x, s.k, 0, s.n)
				rowBytes, _ := dt.RowBytes(s.k)
				newTask := func(dst []float32) *task {
					return &task{kind: kMatMul, total: s.m, dst: dst, w: raw, wt: dt, n: s.n, k: s.k, m: s.m, act: &a, simd: simdVBMI}
				}
				got, want := make([]float32, s.n*s.m), make([]float32, s.n*s.m)
				// Two ranges, as two threads would split them.
				split := min(s.m, (s.m/2+31)/32*32)
				for _, r := range [][2]int{{0, split}, {split, s.m}} {
					if !amxMatMat(newTask(got), rowBytes, r[0], r[1]) {
						t.Fatal("the AMX kernel declined")
					}
				}
				simdMatMatQ(simdVBMI, newTask(want), rowBytes, 0, s.m)
				w := make([]float32, s.k)
				for o := range s.m {
					dtype.DequantizeRow(dt, w, raw[o*rowBytes:(o+1)*rowBytes])
					for i := range s.n {
						var mag float64
						for j, wj := range w {
							mag += math.Abs(float64(wj) * float64(a.q[i*s.k+j]) * float64(a.d[i*s.k/32+j/32]))
						}
						if d := math.Abs(float64(got[i*s.m+o] - want[i*s.m+o])); d > 1e-5*mag {
							t.Fatalf("token %d, row %d: AMX %v, VNNI %v (|Δ| %.3g > 1e-5·%.3g)", i, o, got[i*s.m+o], want[i*s.m+o], d, mag)
						}
					}
				}
			})
		}
	}
}
