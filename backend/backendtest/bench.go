package backendtest

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/glint-llm/glint/backend"
	"github.com/glint-llm/glint/dtype"
)

// Llama 3.2 1B sizes.
const (
	benchDim     = 2048
	benchHeads   = 32
	benchKVHeads = 8
	benchHeadDim = 64
	benchFFN     = 8192
	benchVocab   = 128256
	benchPrefill = 128
)

// Bench runs a sub-benchmark per op at Llama 3.2 1B sizes: BenchMatMul under
// "MatMul" and BenchOps under "Ops". Each sub-benchmark makes its own backend
// and only the weights it needs (the LM head is 215–280 MB), and releases
// them before the next one.
//
// A backend whose benchmarks should be selectable with -bench MatMul calls
// the two halves from top-level BenchmarkMatMul and BenchmarkOps instead, since
// a -bench pattern without a slash only matches top-level names.
func Bench(b *testing.B, newBackend func(b *testing.B) backend.Backend) {
	b.Run("MatMul", func(b *testing.B) { BenchMatMul(b, newBackend) })
	b.Run("Ops", func(b *testing.B) { BenchOps(b, newBackend) })
}

// BenchMatMul times MatMulTransposed at the Llama 3.2 1B projection shapes for
// decode (n=1; Q4_0 also n=2, 4, 8: sequences decoding together) and
// prefill (n=128), and the LM head. Names read
// <type>/<out>x<in>/n=<tokens>; SetBytes is the weight size, so the MB/s
// column is the weight bandwidth achieved.
func BenchMatMul(b *testing.B, newBackend func(b *testing.B) backend.Backend) {
	type mm struct {
		dt   dtype.Type
		m, k int
		ns   []int
	}
	var mms []mm
	for _, dt := range []dtype.Type{dtype.Q4_0, dtype.Q8_0, dtype.F16, dtype.F32} {
		ns := []int{1, benchPrefill}
		if dt == dtype.Q4_0 {
			// Several sequences decoding together: the weights should be
			// read once for all rows, so n = 4 costs little more than n = 1.
			ns = []int{1, 2, 4, 8, benchPrefill}
		}
		for _, s := range [][2]int{{benchDim, benchDim}, {benchFFN, benchDim}, {benchDim, benchFFN}} {
			mms = append(mms, mm{dt, s[0], s[1], ns})
		}
	}
	mms = append(mms, mm{dtype.Q6_K, benchVocab, benchDim, []int{1, 4}}, mm{dtype.Q8_0, benchVocab, benchDim, []int{1}},
		mm{dtype.Q4_0, benchVocab, benchDim, []int{1}})
	for _, c := range mms {
		for _, n := range c.ns {
			b.Run(fmt.Sprintf("%v/%dx%d/n=%d", c.dt, c.m, c.k, n), func(b *testing.B) {
				e := newBenchEnv(b, newBackend)
				raw := RandomWeight(b, e.rng, c.dt, c.m, c.k)
				w := e.weight(c.dt, raw, c.m, c.k)
				x := e.f32(e.rand(n*c.k), n, c.k)
				dst := e.alloc(dtype.F32, n, c.m)
				b.SetBytes(int64(len(raw)))
				e.loop(func() { e.be.MatMulTransposed(dst, x, w, n) })
			})
		}
	}
}

// BenchOps times every op other than MatMulTransposed at Llama 3.2 1B sizes,
// for one token and for a prefill of 128 where the op takes n.
func BenchOps(b *testing.B, newBackend func(b *testing.B) backend.Backend) {
	for _, n := range []int{1, benchPrefill} {
		b.Run(fmt.Sprintf("Embedding/Q8_0/n=%d", n), func(b *testing.B) {
			e := newBenchEnv(b, newBackend)
			// Gather cost does not depend on the vocabulary size, so a
			// small table stands in for the 128256-row one.
			const rows = 1024
			table := e.weight(dtype.Q8_0, RandomWeight(b, e.rng, dtype.Q8_0, rows, benchDim), rows, benchDim)
			ids := make([]int32, n)
			for i := range ids {
				ids[i] = int32(e.rng.IntN(rows))
			}
			it := e.alloc(dtype.I32, n)
			if err := e.be.WriteI32(it, 0, ids); err != nil {
				b.Fatal(err)
			}
			dst := e.alloc(dtype.F32, n, benchDim)
			e.loop(func() { e.be.Embedding(dst, table, it, n) })
		})
		b.Run(fmt.Sprintf("RMSNorm/n=%d", n), func(b *testing.B) {
			e := newBenchEnv(b, newBackend)
			w := e.weight(dtype.F32, f32Bytes(e.rand(benchDim)), benchDim)
			x := e.f32(e.rand(n*benchDim), n, benchDim)
			dst := e.alloc(dtype.F32, n, benchDim)
			b.SetBytes(int64(8 * n * benchDim))
			e.loop(func() { e.be.RMSNorm(dst, x, w, n, 1e-5) })
		})
		b.Run(fmt.Sprintf("RoPE/n=%d", n), func(b *testing.B) {
			e := newBenchEnv(b, newBackend)
			freqs := e.weight(dtype.F32, f32Bytes(randF32(e.rng, benchHeadDim/2, 1, 8)), benchHeadDim/2)
			x := e.f32(e.rand(n*benchDim), n, benchDim)
			pos := make([]int32, n)
			for i := range pos {
				pos[i] = int32(100 + i)
			}
			pt := e.alloc(dtype.I32, n)
			if err := e.be.WriteI32(pt, 0, pos); err != nil {
				b.Fatal(err)
			}
			r := backend.Rope{Dims: benchHeadDim, Theta: 500000, Freqs: freqs}
			e.loop(func() { e.be.RoPE(x, n, benchHeads, benchHeadDim, pt, r) })
		})
		b.Run(fmt.Sprintf("SiLUMul/n=%d", n), func(b *testing.B) {
			e := newBenchEnv(b, newBackend)
			g := e.f32(e.rand(n*benchFFN), n, benchFFN)
			u := e.f32(e.rand(n*benchFFN), n, benchFFN)
			dst := e.alloc(dtype.F32, n, benchFFN)
			b.SetBytes(int64(12 * n * benchFFN))
			e.loop(func() { e.be.SiLUMul(dst, g, u, n) })
		})
		b.Run(fmt.Sprintf("Add/n=%d", n), func(b *testing.B) {
			e := newBenchEnv(b, newBackend)
			x := e.f32(e.rand(n*benchDim), n, benchDim)
			y := e.f32(e.rand(n*benchDim), n, benchDim)
			b.SetBytes(int64(12 * n * benchDim))
			e.loop(func() { e.be.Add(x, x, y, n) })
		})
	}
	b.Run("CopySlice/kv-append", func(b *testing.B) {
		e := newBenchEnv(b, newBackend)
		const maxSeq, kvCols = 1024, benchKVHeads * benchHeadDim
		cache := e.alloc(dtype.F32, maxSeq, benchKVHeads, benchHeadDim)
		src := e.f32(e.rand(kvCols), 1, kvCols)
		b.SetBytes(int64(8 * kvCols))
		pos := 0
		e.loop(func() {
			e.be.CopySlice(cache, pos*kvCols, src, 0, kvCols)
			pos = (pos + 1) % maxSeq
		})
	})
	// Attention over a single sequence's cache (the causal view kvcache
	// gives): decode steps (a short reply, a long context) and a prefill,
	// over F32 and F16 caches.
	for _, c := range []struct {
		n, pos0 int
		dt      dtype.Type
	}{{1, 63, dtype.F16}, {1, 511, dtype.F32}, {1, 4095, dtype.F16}, {benchPrefill, 0, dtype.F32}, {benchPrefill, 0, dtype.F16}} {
		name := fmt.Sprintf("Attention/n=%d/kvLen=%d/%v", c.n, c.pos0+c.n, c.dt)
		b.Run(name, func(b *testing.B) {
			e := newBenchEnv(b, newBackend)
			const kvCols = benchKVHeads * benchHeadDim
			cells := c.pos0 + c.n
			q := e.f32(e.rand(c.n*benchDim), c.n, benchDim)
			k, v := e.alloc(c.dt, cells, benchKVHeads, benchHeadDim), e.alloc(c.dt, cells, benchKVHeads, benchHeadDim)
			src := e.f32(e.rand(cells*kvCols), cells, kvCols)
			e.be.CopySlice(k, 0, src, 0, cells*kvCols)
			e.be.CopySlice(v, 0, src, 0, cells*kvCols)
			kv, err := Causal(c.n, c.pos0).Upload(e.be)
			if err != nil {
				b.Fatal(err)
			}
			out := e.alloc(dtype.F32, c.n, benchDim)
			a := backend.Attn{Heads: benchHeads, KVHeads: benchKVHeads, HeadDim: benchHeadDim, Scale: 0.125}
			b.SetBytes(int64(2 * c.dt.BlockBytes() * cells * kvCols))
			e.loop(func() { e.be.Attention(out, q, k, v, c.n, kv, a) })
		})
	}
	b.Run("Argmax/vocab", func(b *testing.B) {
		e := newBenchEnv(b, newBackend)
		x := e.f32(randF32(e.rng, benchVocab, -10, 10), 1, benchVocab)
		dst := e.alloc(dtype.I32, 1)
		b.SetBytes(int64(4 * benchVocab))
		e.loop(func() { e.be.Argmax(dst, x, 1) })
	})
}

type benchEnv struct {
	b   *testing.B
	be  backend.Backend
	rng *rand.Rand
}

func newBenchEnv(b *testing.B, newBackend func(b *testing.B) backend.Backend) *benchEnv {
	be := newBackend(b)
	b.Cleanup(func() { be.Close() })
	return &benchEnv{b: b, be: be, rng: rand.New(rand.NewPCG(2, 3))}
}

func (e *benchEnv) rand(n int) []float32 { return randF32(e.rng, n, -1, 1) }

func (e *benchEnv) alloc(dt dtype.Type, shape ...int) backend.Tensor {
	t, err := e.be.Alloc(dt, shape...)
	if err != nil {
		e.b.Fatal(err)
	}
	return t
}

func (e *benchEnv) f32(data []float32, shape ...int) backend.Tensor {
	t := e.alloc(dtype.F32, shape...)
	if err := e.be.WriteF32(t, 0, data); err != nil {
		e.b.Fatal(err)
	}
	return t
}

func (e *benchEnv) weight(dt dtype.Type, data []byte, shape ...int) backend.Tensor {
	t, err := e.be.Weight("bench", dt, shape, data)
	if err != nil {
		e.b.Fatal(err)
	}
	return t
}

// loop runs op once untimed (first-use costs: scratch growth, kernel
// compilation), then b.N times, waiting for queued work before stopping the
// clock so that asynchronous backends are timed fairly.
func (e *benchEnv) loop(op func()) {
	op()
	if err := e.be.Sync(); err != nil {
		e.b.Fatal(err)
	}
	e.b.ReportAllocs()
	e.b.ResetTimer()
	for range e.b.N {
		op()
	}
	if err := e.be.Sync(); err != nil {
		e.b.Fatal(err)
	}
	e.b.StopTimer()
}

// BenchLayers times the seven projections of every Llama 3.2 1B layer (q, k,
// v, o, gate, up, down; 16 layers, every weight distinct) for one token, in
// the order a decode step runs them. Unlike one matmul repeated, whose
// weight stays in cache, this streams the layers' weights from memory as
// decode does, and so includes what each op costs to start and finish;
// SetBytes is all the weights, so MB/s is the decode weight bandwidth.
func BenchLayers(b *testing.B, newBackend func(b *testing.B) backend.Backend) {
	const layers = 16
	shapes := [][2]int{{benchDim, benchDim}, {benchKVHeads * benchHeadDim, benchDim},
		{benchKVHeads * benchHeadDim, benchDim}, {benchDim, benchDim},
		{benchFFN, benchDim}, {benchFFN, benchDim}, {benchDim, benchFFN}}
	for _, dt := range []dtype.Type{dtype.Q4_0, dtype.Q8_0, dtype.F16} {
		b.Run(fmt.Sprintf("%v/n=1", dt), func(b *testing.B) {
			e := newBenchEnv(b, newBackend)
			type proj struct {
				w      backend.Tensor
				x, dst backend.Tensor
			}
			xs := map[int]backend.Tensor{}
			outs := map[int]backend.Tensor{}
			var ps []proj
			var bytes int64
			for range layers {
				for _, s := range shapes {
					raw := RandomWeight(b, e.rng, dt, s[0], s[1])
					bytes += int64(len(raw))
					if xs[s[1]] == nil {
						xs[s[1]] = e.f32(e.rand(s[1]), 1, s[1])
					}
					if outs[s[0]] == nil {
						outs[s[0]] = e.alloc(dtype.F32, 1, s[0])
					}
					ps = append(ps, proj{e.weight(dt, raw, s[0], s[1]), xs[s[1]], outs[s[0]]})
				}
			}
			b.SetBytes(bytes)
			runtime.GC() // the setup left hundreds of MB of garbage; collect it untimed
			e.loop(func() {
				for _, p := range ps {
					e.be.MatMulTransposed(p.dst, p.x, p.w, 1)
				}
			})
		})
	}
}
