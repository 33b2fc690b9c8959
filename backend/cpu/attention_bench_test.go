package cpu

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/glint-llm/glint/backend"
	"github.com/glint-llm/glint/backend/backendtest"
	"github.com/glint-llm/glint/dtype"
	"github.com/glint-llm/glint/numerics"
)

// BenchmarkAttentionLong times the non-flash attention of Llama 3.2 1B's
// shape (32 query heads on 8 kv heads of 64) over an F16 cache of 4,096 and
// 16,384 cells: one decode row, and a prompt tile of 32 rows at the end of
// the view as kvcache views a prompt chunk (every row scans all cells), in
// both ggml flavours at the host's level (GLINT_CPU_SIMD caps it), on one
// thread (cpu-ns/op: the thread's CPU time, steadier on a shared machine)
// and on two. It measures the kernel without the model's matmuls
// around it, steadier than `generate report` at a long context.
func BenchmarkAttentionLong(b *testing.B) {
	const heads, kvHeads, hd = 32, 8, 64
	rng := rand.New(rand.NewPCG(3, 4))
	defer func(f numerics.Flavour) { flavour = f }(flavour)
	for _, cells := range []int{4096, 16384} {
		kv := make([]uint16, cells*kvHeads*hd)
		for i := range kv {
			kv[i] = dtype.F32ToF16(2*rng.Float32() - 1)
		}
		for _, wide := range []bool{false, true} {
			for _, n := range []int{1, 32} {
				for _, threads := range []int{1, 2} {
					name := fmt.Sprintf("%s/cells=%d/n=%d/t=%d", map[bool]string{false: "avx2", true: "avx512"}[wide], cells, n, threads)
					b.Run(name, func(b *testing.B) {
						flavour = wideFlavour(wide)
						be := newAt(threads, testNumerics.Level)
						defer be.Close()
						view := backendtest.Prompt(n, cells-n)
						kc, _ := be.Alloc(dtype.F16, cells, kvHeads*hd)
						vc, _ := be.Alloc(dtype.F16, cells, kvHeads*hd)
						kb := be.tensor("bench", "k", kc, dtype.F16)
						vb := be.tensor("bench", "v", vc, dtype.F16)
						copy(halfs(kb), kv)
						copy(halfs(vb), kv[len(kv)/2:])
						copy(halfs(vb)[len(kv)/2:], kv)
						q, _ := be.Alloc(dtype.F32, n, heads*hd)
						qs := make([]float32, n*heads*hd)
						for i := range qs {
							qs[i] = 3 * (2*rng.Float32() - 1)
						}
						_ = be.WriteF32(q, 0, qs)
						out, _ := be.Alloc(dtype.F32, n, heads*hd)
						rows, _ := be.Alloc(dtype.I32, n, 4)
						cs, _ := be.Alloc(dtype.I32, cells, 3)
						_ = be.WriteI32(rows, 0, view.Rows)
						_ = be.WriteI32(cs, 0, view.Cells)
						kvv := backend.KVView{Rows: rows, Cells: cs, Lo: 0, Hi: cells}
						attn := backend.Attn{Heads: heads, KVHeads: kvHeads, HeadDim: hd, Scale: 0.125}
						be.Attention(out, q, kc, vc, n, kvv, attn)
						runtime.LockOSThread()
						defer runtime.UnlockOSThread()
						b.ResetTimer()
						cpu0, ok := threadCPU()
						for range b.N {
							be.Attention(out, q, kc, vc, n, kvv, attn)
						}
						if cpu1, ok1 := threadCPU(); ok && ok1 && threads == 1 {
							b.ReportMetric(float64(cpu1-cpu0)/float64(b.N), "cpu-ns/op")
						}
						if err := be.Err(); err != nil {
							b.Fatal(err)
						}
					})
				}
			}
		}
	}
}
