package cpu

import (
	"math"
	"math/rand/v2"
	"testing"
)

// flash.c's softmax gives flashWeightsGo's bits (the same libm expf and
// tanhf, the same roundings: S·ms rounded before + vs), with and without a
// soft cap, over scores that rise (every cell a new maximum), fall and mix.
func TestFlashWeightsC(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, n := range []int{0, 1, 7, 300} {
		for _, cap := range []float32{0, 30} {
			for _, order := range []string{"random", "rising", "falling"} {
				d := make([]float32, n)
				for i := range d {
					switch order {
					case "random":
						d[i] = rng.Float32()*80 - 40
					case "rising":
						d[i] = float32(i) * 0.37
					default:
						d[i] = -float32(i) * 0.37
					}
				}
				ms, vs := make([]float32, n), make([]float32, n)
				ms2, vs2 := make([]float32, n), make([]float32, n)
				s := flashWeights(d, ms, vs, 0.125, cap)
				s2 := flashWeightsGo(d, ms2, vs2, 0.125, cap)
				if math.Float32bits(s) != math.Float32bits(s2) {
					t.Fatalf("n %d cap %g %s: S %v, Go %v", n, cap, order, s, s2)
				}
				for i := range n {
					if ms[i] != ms2[i] || vs[i] != vs2[i] {
						t.Fatalf("n %d cap %g %s: cell %d: ms %v vs %v, Go %v %v", n, cap, order, i, ms[i], vs[i], ms2[i], vs2[i])
					}
				}
			}
		}
	}
}
