package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/glint-llm/glint/backend"
	"github.com/glint-llm/glint/backend/backendtest"
	"github.com/glint-llm/glint/dtype"
	"github.com/glint-llm/glint/numerics"
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

// BenchmarkFlashLong times flash attention (and, beside it, the non-flash
// path where it takes the cache) at BenchmarkAttentionLong's shape: 32
// query heads on 8 KV heads of 64 over 4,096 cells of an F16 or Q8_0 cache,
// one decode row and a 32-row prompt tile, the host's flavour and level, on
// one thread (cpu-ns/op: the thread's CPU time).
func BenchmarkFlashLong(b *testing.B) {
	const heads, kvHeads, hd, cells = 32, 8, 64, 4096
	rng := rand.New(rand.NewPCG(3, 4))
	for _, ct := range []dtype.Type{dtype.F16, dtype.Q8_0} {
		kraw := backendtest.RandomWeight(b, rng, ct, cells, kvHeads*hd)
		vraw := backendtest.RandomWeight(b, rng, ct, cells, kvHeads*hd)
		for _, n := range []int{1, 32} {
			for _, flash := range []bool{true, false} {
				name := fmt.Sprintf("%v/n=%d/%s", ct, n, map[bool]string{true: "flash", false: "mulmat"}[flash])
				b.Run(name, func(b *testing.B) {
					be := newAt(1, testNumerics.Level)
					defer be.Close()
					view := backendtest.Prompt(n, cells-n)
					kc, _ := be.Alloc(ct, cells, kvHeads*hd)
					vc, _ := be.Alloc(ct, cells, kvHeads*hd)
					copy(be.tensor("bench", "k", kc, ct).data, kraw)
					copy(be.tensor("bench", "v", vc, ct).data, vraw)
					q, _ := be.Alloc(dtype.F32, n, heads*hd)
					qs := make([]float32, n*heads*hd)
					for i := range qs {
						qs[i] = 2*rng.Float32() - 1
					}
					_ = be.WriteF32(q, 0, qs)
					out, _ := be.Alloc(dtype.F32, n, heads*hd)
					rows, _ := be.Alloc(dtype.I32, n, 4)
					cs, _ := be.Alloc(dtype.I32, cells, 3)
					_ = be.WriteI32(rows, 0, view.Rows)
					_ = be.WriteI32(cs, 0, view.Cells)
					kvv := backend.KVView{Rows: rows, Cells: cs, Lo: 0, Hi: cells}
					attn := backend.Attn{Heads: heads, KVHeads: kvHeads, HeadDim: hd, Scale: 0.125, Flash: flash}
					be.Attention(out, q, kc, vc, n, kvv, attn)
					if err := be.Err(); err != nil {
						b.Skip(err)
					}
					runtime.LockOSThread()
					defer runtime.UnlockOSThread()
					b.ResetTimer()
					cpu0, ok := threadCPU()
					for range b.N {
						be.Attention(out, q, kc, vc, n, kvv, attn)
					}
					if cpu1, ok1 := threadCPU(); ok && ok1 {
						b.ReportMetric(float64(cpu1-cpu0)/float64(b.N), "cpu-ns/op")
					}
				})
			}
		}
	}
}

// Every kernel level gives flash attention the portable Go path's bits (the
// C dot products, f16 and f32 accumulators and dequantisers of flash.c, and
// the quantised keys through the matmul kernels), in both ggml flavours,
// over every cache type the kernel takes: decode and prompt rows, a window,
// a soft cap, head sizes with 32-element remainders (96: an odd number of
// blocks, which IQ4_NL's pairs end in ggml's scalar tail) and, for float
// caches, remainders past the lanes (40), and GQA groups of 4.
func TestFlashLevelsBitExact(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	type fc struct {
		view               backendtest.View
		heads, kvHeads, hd int
		window             int
		softCap            float32
	}
	cases := []fc{
		{backendtest.Causal(1, 300), 8, 2, 64, 0, 0},
		{backendtest.Prompt(5, 200), 8, 2, 96, 0, 0},
		{backendtest.Causal(4, 70), 4, 4, 64, 33, 0},
		{backendtest.Causal(1, 150), 6, 3, 32, 0, 20},
		{backendtest.Causal(3, 90), 4, 1, 40, 0, 0},
	}
	pairs := [][2]dtype.Type{
		{dtype.F16, dtype.F16}, {dtype.Q8_0, dtype.Q8_0}, {dtype.Q4_0, dtype.Q4_1}, {dtype.Q5_0, dtype.Q5_1},
		{dtype.IQ4_NL, dtype.IQ4_NL}, {dtype.Q4_1, dtype.Q5_0}, {dtype.Q5_1, dtype.Q4_0}, {dtype.F16, dtype.Q8_0},
		{dtype.Q8_0, dtype.F16}, {dtype.BF16, dtype.BF16}, {dtype.F32, dtype.F32}, {dtype.F16, dtype.F32},
	}
	defer func(f numerics.Flavour) { flavour = f }(flavour)
	for _, c := range cases {
		n, cells := c.view.N(), len(c.view.Cells)/3
		q := make([]float32, n*c.heads*c.hd)
		for i := range q {
			q[i] = 2*rng.Float32() - 1
		}
		for _, p := range pairs {
			if c.hd%32 != 0 && (p[0].Quantized() || p[1].Quantized()) {
				continue
			}
			kraw := backendtest.RandomWeight(t, rng, p[0], cells, c.kvHeads*c.hd)
			vraw := backendtest.RandomWeight(t, rng, p[1], cells, c.kvHeads*c.hd)
			for _, wide := range []bool{false, true} {
				flavour = wideFlavour(wide)
				var want []float32
				for _, l := range simdLevels() {
					be := newAt(2, l)
					kc, _ := be.Alloc(p[0], cells, c.kvHeads*c.hd)
					vc, _ := be.Alloc(p[1], cells, c.kvHeads*c.hd)
					copy(be.tensor("test", "k", kc, p[0]).data, kraw)
					copy(be.tensor("test", "v", vc, p[1]).data, vraw)
					qt, _ := be.Alloc(dtype.F32, n, c.heads*c.hd)
					_ = be.WriteF32(qt, 0, q)
					out, _ := be.Alloc(dtype.F32, n, c.heads*c.hd)
					rows, _ := be.Alloc(dtype.I32, n, 4)
					cs, _ := be.Alloc(dtype.I32, cells, 3)
					_ = be.WriteI32(rows, 0, c.view.Rows)
					_ = be.WriteI32(cs, 0, c.view.Cells)
					be.Attention(out, qt, kc, vc, n, backend.KVView{Rows: rows, Cells: cs, Lo: 0, Hi: cells},
						backend.Attn{Heads: c.heads, KVHeads: c.kvHeads, HeadDim: c.hd, Scale: 0.125, SoftCap: c.softCap,
							Window: c.window, Flash: true})
					got := make([]float32, n*c.heads*c.hd)
					_ = be.ReadF32(out, 0, got)
					if err := be.Err(); err != nil {
						t.Fatalf("%v/%v hd %d: %v", p[0], p[1], c.hd, err)
					}
					be.Close()
					if want == nil {
						want = got
						continue
					}
					for i := range got {
						if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
							t.Fatalf("K %v V %v, %d rows, hd %d, wide %v, %v: out[%d] = %v, Go %v", p[0], p[1], n, c.hd, wide, l, i, got[i], want[i])
						}
					}
				}
			}
		}
	}
}
