package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"github.com/glint-llm/glint/backend"
	"github.com/glint-llm/glint/backend/backendtest"
	"github.com/glint-llm/glint/dtype"
	"github.com/glint-llm/glint/numerics"
)

// simdLevels are the kernel levels this machine can run, portable Go first.
func simdLevels() []simdLevel {
	var ls []simdLevel
	for l := simdOff; l <= hostSIMD; l++ {
		ls = append(ls, l)
	}
	return ls
}

// testNumerics are the tests' level and flavour: the host's best, or what
// GLINT_CPU_SIMD and GLINT_GGML_FLAVOR ask for (numerics.FromEnv).
var testNumerics = func() numerics.Settings {
	s, err := numerics.FromEnv().Resolve(numerics.HostCPU())
	if err != nil {
		panic(err)
	}
	return s
}()

// flavour is the arithmetic newAt's backends take: testNumerics', switched
// by the tests that run each one.
var flavour = testNumerics.Flavour

// wideFlavour is the AVX-512 flavour (with vdpbf16ps's BF16 sums where the
// tests' flavour has them) if wide, else the AVX2 one.
func wideFlavour(wide bool) numerics.Flavour {
	switch {
	case !wide:
		return numerics.FlavourAVX2
	case testNumerics.Flavour.BF16():
		return numerics.FlavourAVX512BF16
	}
	return numerics.FlavourAVX512
}

func newAt(threads int, l simdLevel) *Backend {
	b := New(threads)
	b.simd, b.flavour = l, flavour
	return b
}

// TestConformanceSIMD runs the suite on every kernel level below the host's
// best (TestConformance covers the default), so that the Go path stays
// correct on a SIMD machine and AVX2 is checked where AVX-512 is the default.
func TestConformanceSIMD(t *testing.T) {
	for _, l := range simdLevels() {
		if l == hostSIMD {
			continue
		}
		t.Run(l.String(), func(t *testing.T) {
			backendtest.Run(t, func(t *testing.T) backend.Backend { return newAt(2, l) })
		})
	}
}

// TestMatMulSIMD checks every kernel level against a float64 reference over
// the dtype dequantisation, at shapes the suite does not reach: rows that
// fill several 32-row panels plus a ragged one, k spanning several 256-wide
// chunks with a short last one, and token counts on both sides of the
// micro-kernel widths (6 and 12; 4 for the quantised tiles).
func TestMatMulSIMD(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 13))
	shapes := map[dtype.Type][2]int{
		dtype.F32: {75, 600}, dtype.F16: {75, 600}, dtype.BF16: {75, 600},
		dtype.Q8_0: {75, 608}, dtype.Q4_0: {75, 608}, dtype.Q6_K: {75, 768},
		dtype.Q4_1: {75, 608}, dtype.Q5_0: {75, 608}, dtype.Q5_1: {75, 608}, dtype.IQ4_NL: {75, 608},
		dtype.Q2_K: {75, 768}, dtype.Q3_K: {75, 768}, dtype.Q4_K: {75, 768}, dtype.Q5_K: {75, 768}, dtype.IQ4_XS: {75, 768},
	}

	for _, dt := range backendtest.WeightTypes {
		m, k := shapes[dt][0], shapes[dt][1]
		raw := backendtest.RandomWeight(t, rng, dt, m, k)
		wf := make([]float32, m*k)
		rowBytes, _ := dt.RowBytes(k)
		for o := range m {
			dtype.DequantizeRow(dt, wf[o*k:(o+1)*k], raw[o*rowBytes:(o+1)*rowBytes])
		}
		for _, n := range []int{1, 2, 7, 13, 25} {
			x := make([]float32, n*k)
			for i := range x {
				x[i] = 2*rng.Float32() - 1
			}
			// Quantised weights see rounded activations; every level
			// rounds bit-identically (TestQuantizeActivations).
			xr := make([]float32, n*k)
			for i := range n {
				dtype.RoundActivations(dt.ActivationType(), xr[i*k:(i+1)*k], x[i*k:(i+1)*k])
			}
			for _, l := range simdLevels() {
				name := fmt.Sprintf("%v/%v/n=%d", l, dt, n)
				got := matMulAt(t, l, 2, dt, raw, m, k, n, x)
				for i := range n {
					for o := range m {
						var want, mag float64
						for j := range k {
							p := float64(xr[i*k+j]) * float64(wf[o*k+j])
							want += p
							mag += math.Abs(p)
						}
						// Same bound as the suite: float32 products summed
						// in float32 in some order.
						if g := float64(got[i*m+o]); math.Abs(g-want) > 1e-5*mag {
							t.Fatalf("%s: dst[%d,%d] = %g, want %g (Σ|x·w| %g)", name, i, o, g, want, mag)
						}
					}
				}
			}
		}
	}
}

// BenchmarkKernels times one thread's matmul kernels per level and type on
// a 256×2048 weight that stays in L2, so MB/s is the kernel's compute
// throughput (the ceiling on the memory bandwidth it can use), for decode
// (n=1) and for 8- and 32-token tiles of prefill.
func BenchmarkKernels(b *testing.B) {
	const m, k = 256, 2048
	rng := rand.New(rand.NewPCG(5, 6))
	for _, dt := range backendtest.WeightTypes {
		raw := backendtest.RandomWeight(b, rng, dt, m, k)
		for _, n := range []int{1, 8, 32} {
			for _, l := range simdLevels() {
				b.Run(fmt.Sprintf("%v/%v/n=%d", dt, l, n), func(b *testing.B) {
					be := newAt(1, l)
					defer be.Close()
					w, _ := be.Weight("w", dt, []int{m, k}, raw)
					x, _ := be.Alloc(dtype.F32, n, k)
					dst, _ := be.Alloc(dtype.F32, n, m)
					_ = be.WriteF32(x, 0, make([]float32, n*k))
					b.SetBytes(int64(len(raw)))
					for range b.N {
						be.MatMulTransposed(dst, x, w, n)
					}
					if err := be.Err(); err != nil {
						b.Fatal(err)
					}
				})
			}
		}
	}
}

// BenchmarkKernelsDRAM times one thread's matmul of a decode-sized weight
// (the FFN's shapes) read from memory, as a decode reads every weight:
// each iteration takes the next of several copies, together twice the
// 32 MiB of a large L3, so none is still cached (BenchmarkMatMul's single
// weight mostly is). n > 1 is several sequences decoding together, whose
// extra arithmetic per block the kernels must overlap with the memory
// stream to cost little more than n = 1. cpu-ns/op is the thread's CPU
// time (Linux), steadier than ns/op where other work shares the cores.
func BenchmarkKernelsDRAM(b *testing.B) {
	const total = 64 << 20
	rng := rand.New(rand.NewPCG(7, 8))
	for _, dt := range []dtype.Type{dtype.Q4_0, dtype.Q6_K, dtype.Q8_0, dtype.F16} {
		// The FFN's up (8192×2048) and down (2048×8192) shapes: a longer row
		// puts a kernel's prefetches further ahead.
		for _, shape := range [][2]int{{8192, 2048}, {2048, 8192}} {
			m, k := shape[0], shape[1]
			raw := backendtest.RandomWeight(b, rng, dt, m, k)
			copies := total/len(raw) + 1
			for _, c := range []struct{ n, threads int }{{1, 1}, {2, 1}, {4, 1}, {8, 1}, {1, 2}, {4, 2}, {2, 2}, {8, 2}} {
				n := c.n
				b.Run(fmt.Sprintf("%v/%dx%d/n=%d/t=%d", dt, m, k, n, c.threads), func(b *testing.B) {
					runtime.LockOSThread() // a one-thread backend runs on the caller's thread
					defer runtime.UnlockOSThread()
					be := newAt(c.threads, testNumerics.Level)
					defer be.Close()
					ws := weightCopies(b, be, dt, m, k, raw, copies)
					x, dst, _ := benchActs(be, rng, n, k, m)
					b.SetBytes(int64(len(raw)))
					b.ResetTimer()
					cpu0, ok := threadCPU()
					for i := range b.N {
						be.MatMulTransposed(dst, x, ws[i%copies], n)
					}
					if cpu1, ok1 := threadCPU(); ok && ok1 {
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

// weightCopies loads copies copies of the m×k weight raw of type dt, so that
// a benchmark taking them in turn reads each from memory.
func weightCopies(b *testing.B, be *Backend, dt dtype.Type, m, k int, raw []byte, copies int) []backend.Tensor {
	ws := make([]backend.Tensor, copies)
	for i := range ws {
		w, err := be.Weight("w", dt, []int{m, k}, raw)
		if err != nil {
			b.Fatal(err)
		}
		ws[i] = w
	}
	return ws
}

// benchActs allocates a matmul's n×k activations, random in [-1, 1) and
// written to x (xs holds them), and its n×m destination.
func benchActs(be *Backend, rng *rand.Rand, n, k, m int) (x, dst backend.Tensor, xs []float32) {
	xs = make([]float32, n*k)
	for i := range xs {
		xs[i] = 2*rng.Float32() - 1
	}
	x, _ = be.Alloc(dtype.F32, n, k)
	dst, _ = be.Alloc(dtype.F32, n, m)
	_ = be.WriteF32(x, 0, xs)
	return x, dst, xs
}

// BenchmarkKernelsPrefill times the matmul of a 128-token prompt by the
// FFN's weights (up 8192×2048, down 2048×8192), the shapes that take most
// of a prompt's time, and attention's (2048×2048, 512×2048), on one thread
// and on two. As in a model, the weights come from memory: each iteration
// takes the next of several copies, together three times a 32 MiB L3.
// GFLOP/s is over the calling thread's CPU time at t=1 (Linux; else wall
// time), steadier than ns/op where other work shares the cores, and over
// wall time at t=2. It compares with ggml's MUL_MAT of the same m, n, k.
func BenchmarkKernelsPrefill(b *testing.B) {
	const n = 128
	rng := rand.New(rand.NewPCG(9, 10))
	for _, dt := range []dtype.Type{dtype.F16, dtype.BF16, dtype.Q8_0, dtype.Q4_0, dtype.Q4_K} {
		for _, shape := range [][2]int{{8192, 2048}, {2048, 8192}, {2048, 2048}, {512, 2048}} {
			m, k := shape[0], shape[1]
			raw := backendtest.RandomWeight(b, rng, dt, m, k)
			for _, threads := range []int{1, 2} {
				b.Run(fmt.Sprintf("%v/%dx%d/n=%d/t=%d", dt, m, k, n, threads), func(b *testing.B) {
					runtime.LockOSThread()
					defer runtime.UnlockOSThread()
					be := newAt(threads, testNumerics.Level)
					defer be.Close()
					ws := weightCopies(b, be, dt, m, k, raw, (96<<20)/len(raw)+1)
					x, dst, xs := benchActs(be, rng, n, k, m)
					b.ResetTimer()
					start := time.Now()
					cpu0, ok := threadCPU()
					for i := range b.N {
						// A new prompt each time, so the activations are
						// rounded (quantised) again as in a real prefill.
						_ = be.WriteF32(x, 0, xs)
						be.MatMulTransposed(dst, x, ws[i%len(ws)], n)
					}
					ns := float64(time.Since(start).Nanoseconds())
					if cpu1, ok1 := threadCPU(); ok && ok1 && threads == 1 {
						ns = float64(cpu1 - cpu0)
						b.ReportMetric(ns/float64(b.N), "cpu-ns/op")
					}
					b.ReportMetric(2*float64(m)*float64(n)*float64(k)*float64(b.N)/ns, "GFLOP/s")
					if err := be.Err(); err != nil {
						b.Fatal(err)
					}
				})
			}
		}
	}
}
