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
// the VNNI tiles it replaces, row ranges split as two threads would split
// them. Both sum the same float32 block terms in double, as the portable
// path does (quant.go), so every output must have the portable path's bits.
// Q4_0, whose order the AMX kernel does not follow, must be declined.
func TestAMXMatchesVNNI(t *testing.T) {
	if hostSIMD < simdAMX {
		t.Skip("no AMX on this CPU (or the OS refused the tile state)")
	}
	if amxMatMat(&task{wt: dtype.Q4_0, n: 64, k: 64, m: 32}, 36, 0, 32) {
		t.Fatal("the AMX kernel took Q4_0")
	}
	rng := rand.New(rand.NewPCG(7, 8))
	for _, dt := range []dtype.Type{dtype.Q8_0} {
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
				for o := range s.m {
					row := raw[o*rowBytes : (o+1)*rowBytes]
					for i := range s.n {
						ref := dotQ(dt, &a, i, s.k, row, s.m)
						g, v := got[i*s.m+o], want[i*s.m+o]
						if math.Float32bits(g) != math.Float32bits(ref) || math.Float32bits(v) != math.Float32bits(ref) {
							t.Fatalf("token %d, row %d: AMX %v, VNNI %v, portable %v", i, o, g, v, ref)
						}
					}
				}
			})
		}
	}
}
