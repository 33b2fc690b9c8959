package opencl

import (
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/glint-llm/glint/backend"
	"github.com/glint-llm/glint/dtype"
	"github.com/glint-llm/glint/engine"
	"github.com/glint-llm/glint/internal/shared"
	"github.com/glint-llm/glint/layers"
	"github.com/glint-llm/glint/model/load"
	"github.com/glint-llm/glint/sample"
)

// fusedStep is a Llama layer's decode step without its attention: the ops
// the backend fuses (fuse.go), on tensors named as in the workspace.
type fusedStep struct {
	x, xn, q, k, v, o, gate, up        backend.Tensor
	g1, g2, wq, wk, wv, wo, wg, wu, wd backend.Tensor
	// RoPE of q and k (heads of hd at position pos[0]) and their append to
	// the caches kc and vc at cell 3.
	pos, kc, vc backend.Tensor
	hd          int
	rope        backend.Rope
}

func (s *fusedStep) run(b backend.Backend) {
	b.RMSNorm(s.xn, s.x, s.g1, 1, 1e-5)
	b.MatMulTransposed(s.q, s.xn, s.wq, 1)
	b.MatMulTransposed(s.k, s.xn, s.wk, 1)
	b.MatMulTransposed(s.v, s.xn, s.wv, 1)
	kvRow := backend.Cols(s.k)
	b.RoPE(s.q, 1, backend.Cols(s.q)/s.hd, s.hd, s.pos, s.rope)
	b.RoPE(s.k, 1, kvRow/s.hd, s.hd, s.pos, s.rope)
	b.CopySlice(s.kc, 3*kvRow, s.k, 0, kvRow)
	b.CopySlice(s.vc, 3*kvRow, s.v, 0, kvRow)
	b.MatMulTransposed(s.o, s.q, s.wo, 1)
	b.Add(s.x, s.x, s.o, 1)
	b.RMSNorm(s.xn, s.x, s.g2, 1, 1e-5)
	b.MatMulTransposed(s.gate, s.xn, s.wg, 1)
	b.MatMulTransposed(s.up, s.xn, s.wu, 1)
	b.SiLUMul(s.gate, s.gate, s.up, 1)
	b.MatMulTransposed(s.o, s.gate, s.wd, 1)
	b.Add(s.x, s.o, s.x, 1) // the other operand order
}

// tensors lists the step's outputs, with names, for comparisons.
func (s *fusedStep) outputs() map[string]backend.Tensor {
	return map[string]backend.Tensor{"x": s.x, "xn": s.xn, "q": s.q, "k": s.k, "v": s.v, "o": s.o, "gate": s.gate, "up": s.up,
		"kc": s.kc, "vc": s.vc}
}

// newFusedStep puts the same random step on b: weights of type dt (wv of
// vt), embd K, q rows mq, k and v rows mkv in heads of hd, FFN width ff,
// caches of type ct; rope's Dims, NeoX and Freqs as r says (Freqs non-nil:
// made here).
func newFusedStep(t testing.TB, b backend.Backend, seed uint64, dt, vt dtype.Type, K, mq, mkv, ff, hd int, ct dtype.Type, r backend.Rope) *fusedStep {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 7))
	f32 := func(n int, lo, hi float32, shape ...int) backend.Tensor {
		x, err := b.Alloc(dtype.F32, shape...)
		if err != nil {
			t.Fatal(err)
		}
		v := make([]float32, n)
		for i := range v {
			v[i] = lo + (hi-lo)*rng.Float32()
		}
		if err := b.WriteF32(x, 0, v); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Free(x) })
		return x
	}
	w := func(dt dtype.Type, rows, cols int) backend.Tensor {
		x, err := b.Weight("w", dt, []int{rows, cols}, randomWeight(rng, dt, rows, cols))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Free(x) })
		return x
	}
	pos, err := b.Alloc(dtype.I32, 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Free(pos) })
	if err := b.WriteI32(pos, 0, []int32{1000 + int32(seed)}); err != nil {
		t.Fatal(err)
	}
	cache := func() backend.Tensor {
		c, err := b.Alloc(ct, 5, mkv)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Free(c) })
		return c
	}
	if r.Freqs != nil {
		r.Freqs = f32(r.Dims/2, 1, 8, r.Dims/2)
	}
	return &fusedStep{
		pos: pos, kc: cache(), vc: cache(), hd: hd, rope: r,
		x: f32(K, -2, 2, 1, K), xn: f32(K, 0, 0, 1, K), q: f32(mq, 0, 0, 1, mq), k: f32(mkv, 0, 0, 1, mkv),
		v: f32(mkv, 0, 0, 1, mkv), o: f32(K, 0, 0, 1, K), gate: f32(ff, 0, 0, 1, ff), up: f32(ff, 0, 0, 1, ff),
		g1: f32(K, 0.5, 1.5, K), g2: f32(K, 0.5, 1.5, K),
		wq: w(dt, mq, K), wk: w(dt, mkv, K), wv: w(vt, mkv, K), wo: w(dt, K, mq), wg: w(dt, ff, K), wu: w(dt, ff, K), wd: w(dt, K, ff),
	}
}

// TestFusedDecode runs a layer's decode step (attention aside) three ways:
// on the CPU backend, and on OpenCL fused and op by op, on both kernel
// variants of every device. Fusing must change no bit of any tensor the
// ops write (the caches included), and the step must take the fused launch
// count: 4, 5 where V's weights are of another type or Q's rows sum in
// another order than K's. Both agree with the
// CPU bit for bit, as the ops do (RMSNorm, the quantised matmuls, RoPE, Add,
// SiLU·mul).
func TestFusedDecode(t *testing.T) { eachDevice(t, testFusedDecode) }

func testFusedDecode(t *testing.T, dev *Backend) {
	c := newCPU()
	defer c.Close()
	// Heads of 16, 24, 40 and 64 rows; partial, NeoX and Llama 3 ropes;
	// f16 and f32 caches.
	f16, f32 := dtype.F16, dtype.F32
	cases := []struct {
		dt, vt             dtype.Type
		K, mq, mkv, ff, hd int
		ct                 dtype.Type
		rope               backend.Rope
	}{
		{dtype.Q4_0, dtype.Q4_0, 256, 256, 64, 352, 64, f16, backend.Rope{Dims: 64, Theta: 500000, Freqs: &tensor{}}},
		// Q of 96 rows and K, V of 36 sum in different orders (LK_q4_0):
		// two chains (sameKind).
		{dtype.Q4_0, dtype.Q4_0, 64, 96, 36, 96, 12, f32, backend.Rope{Dims: 12, Theta: 10000}},
		{dtype.Q8_0, dtype.Q8_0, 160, 96, 48, 224, 24, f32, backend.Rope{Dims: 24, Theta: 10000, NeoX: true}},
		{dtype.Q4_1, dtype.Q4_1, 96, 64, 32, 160, 16, f16, backend.Rope{Dims: 12, Theta: 10000}},
		{dtype.Q5_0, dtype.Q5_0, 128, 64, 32, 96, 16, f16, backend.Rope{Dims: 16, Theta: 10000, NeoX: true}},
		{dtype.Q5_1, dtype.Q5_1, 96, 96, 48, 64, 24, f32, backend.Rope{Dims: 24, Theta: 10000}},
		{dtype.IQ4_NL, dtype.IQ4_NL, 224, 64, 32, 96, 16, f16, backend.Rope{Dims: 16, Theta: 10000}},
		{dtype.Q4_K, dtype.Q6_K, 512, 512, 128, 768, 64, f16, backend.Rope{Dims: 64, Theta: 500000, Freqs: &tensor{}}},
		{dtype.Q2_K, dtype.Q3_K, 256, 256, 64, 512, 64, f32, backend.Rope{Dims: 48, Theta: 10000, NeoX: true}},
		{dtype.Q5_K, dtype.Q5_K, 256, 1280, 80, 256, 40, f16, backend.Rope{Dims: 40, Theta: 10000}},
		{dtype.IQ4_XS, dtype.IQ4_XS, 256, 256, 32, 512, 32, f16, backend.Rope{Dims: 32, Theta: 10000}},
		{dtype.Q6_K, dtype.Q6_K, 256, 256, 64, 256, 64, f16, backend.Rope{Dims: 64, Theta: 10000, NeoX: true}},
	}
	for _, o := range []*Backend{dev, otherVariant(t, dev)} {
		for _, tc := range cases {
			name := fmt.Sprintf("%v+%v/cpu=%v", tc.dt, tc.vt, o.mat.cpu)
			t.Run(name, func(t *testing.T) {
				unfused := another(t, o)
				unfused.fuse = false
				if o.mat.cpu != unfused.mat.cpu {
					t.Fatal("variants differ")
				}
				steps := map[string]*fusedStep{}
				for bn, b := range map[string]backend.Backend{"cpu": c, "fused": o, "unfused": unfused} {
					s := newFusedStep(t, b, 3, tc.dt, tc.vt, tc.K, tc.mq, tc.mkv, tc.ff, tc.hd, tc.ct, tc.rope)
					if tc.K >= 512 {
						// A block of zeros, which Q8_K rounds apart.
						if err := b.WriteF32(s.x, 0, make([]float32, 256)); err != nil {
							t.Fatal(err)
						}
					}
					before := int64(0)
					if ob, ok := b.(*Backend); ok {
						before = ob.Stats().Launches
					}
					s.run(b)
					if ob, ok := b.(*Backend); ok && bn == "fused" {
						want := int64(4)
						// Q4_0's order depends on the rows: a multiple of 8 or not.
						if tc.vt != tc.dt || (tc.dt == dtype.Q4_0 && (tc.mq%8 == 0) != (tc.mkv%8 == 0)) {
							want = 5
						}
						if l := ob.Stats().Launches - before; l != want {
							t.Errorf("fused step: %d launches, want %d", l, want)
						}
					}
					if err := b.Sync(); err != nil {
						t.Fatalf("%s: %v", bn, err)
					}
					steps[bn] = s
				}
				for name := range steps["cpu"].outputs() {
					got := readAll(t, o, steps["fused"].outputs()[name])
					want := readAll(t, unfused, steps["unfused"].outputs()[name])
					ref := readAll(t, c, steps["cpu"].outputs()[name])
					for i := range got {
						if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
							t.Fatalf("%s[%d]: fused %v, op by op %v: not the same bits", name, i, got[i], want[i])
						}
						if math.Float32bits(got[i]) != math.Float32bits(ref[i]) {
							t.Fatalf("%s[%d]: opencl %v, cpu %v: not the same bits", name, i, got[i], ref[i])
						}
					}
				}
			})
		}
	}
}

func readAll(t *testing.T, b backend.Backend, x backend.Tensor) []float32 {
	t.Helper()
	out := make([]float32, backend.Elems(x.Shape()))
	if err := b.ReadF32(x, 0, out); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestFusedAliasing gives the backend chains it must not fuse whole (a
// matmul whose residual is its own input, an in-place norm, a SiLU·mul
// into a third tensor, ops in another order, a chain interrupted by an
// unrelated op): each must still compute what the ops do one by one.
func TestFusedAliasing(t *testing.T) { eachDevice(t, testFusedAliasing) }

func testFusedAliasing(t *testing.T, dev *Backend) {
	const K, M = 256, 256
	type env struct {
		x, y, z, g, w, w2 backend.Tensor
	}
	seqs := []struct {
		name string
		run  func(b backend.Backend, e env)
	}{
		{"residual is the input", func(b backend.Backend, e env) {
			b.MatMulTransposed(e.y, e.x, e.w, 1)
			b.Add(e.x, e.x, e.y, 1)
		}},
		{"in-place norm", func(b backend.Backend, e env) {
			b.RMSNorm(e.x, e.x, e.g, 1, 1e-5)
			b.MatMulTransposed(e.y, e.x, e.w, 1)
		}},
		{"silu into a third tensor", func(b backend.Backend, e env) {
			b.MatMulTransposed(e.y, e.x, e.w, 1)
			b.MatMulTransposed(e.z, e.x, e.w2, 1)
			b.SiLUMul(e.x, e.y, e.z, 1)
		}},
		{"silu of up and gate swapped", func(b backend.Backend, e env) {
			b.MatMulTransposed(e.y, e.x, e.w, 1)
			b.MatMulTransposed(e.z, e.x, e.w2, 1)
			b.SiLUMul(e.z, e.z, e.y, 1)
		}},
		{"two matmuls into one tensor", func(b backend.Backend, e env) {
			b.MatMulTransposed(e.y, e.x, e.w, 1)
			b.MatMulTransposed(e.y, e.x, e.w2, 1)
		}},
		{"norm output overwritten", func(b backend.Backend, e env) {
			b.RMSNorm(e.y, e.x, e.g, 1, 1e-5)
			b.MatMulTransposed(e.z, e.y, e.w, 1)
			b.MatMulTransposed(e.y, e.z, e.w2, 1)
			b.Add(e.x, e.x, e.y, 1)
		}},
		{"interrupted", func(b backend.Backend, e env) {
			b.RMSNorm(e.y, e.x, e.g, 1, 1e-5)
			b.Scale(e.z, e.z, 1, 0.5)
			b.MatMulTransposed(e.z, e.y, e.w, 1)
			b.Add(e.z, e.z, e.z, 1)
		}},
	}
	for _, sq := range seqs {
		t.Run(sq.name, func(t *testing.T) {
			unfused := another(t, dev)
			unfused.fuse = false
			var outs [2][3][]float32
			for i, b := range []*Backend{dev, unfused} {
				rng := rand.New(rand.NewPCG(9, 9))
				vec := func(n int) backend.Tensor {
					x, _ := b.Alloc(dtype.F32, 1, n)
					v := make([]float32, n)
					for j := range v {
						v[j] = 2*rng.Float32() - 1
					}
					b.WriteF32(x, 0, v)
					t.Cleanup(func() { b.Free(x) })
					return x
				}
				w := func() backend.Tensor {
					x, err := b.Weight("w", dtype.Q4_K, []int{M, K}, randomWeight(rng, dtype.Q4_K, M, K))
					if err != nil {
						t.Fatal(err)
					}
					t.Cleanup(func() { b.Free(x) })
					return x
				}
				e := env{x: vec(K), y: vec(M), z: vec(M), g: vec(K), w: w(), w2: w()}
				sq.run(b, e)
				for j, x := range []backend.Tensor{e.x, e.y, e.z} {
					outs[i][j] = readAll(t, b, x)
				}
			}
			for j := range outs[0] {
				for k := range outs[0][j] {
					if math.Float32bits(outs[0][j][k]) != math.Float32bits(outs[1][j][k]) {
						t.Fatalf("tensor %d element %d: %v, op by op %v", j, k, outs[0][j][k], outs[1][j][k])
					}
				}
			}
		})
	}
}

// TestFusedModel runs staged models greedily on two backends of each
// device, one fusing and one op by op, prompt and decode steps over an f16
// cache: every step's logits must be the same bits, and the fused decode
// must take fewer launches and move fewer bytes (Stats.Moved: the
// intermediate rows that fusing keeps in local memory).
func TestFusedModel(t *testing.T) {
	files := []string{"stories260K/stories260K-Q4_0.gguf", "llama3-tiny/llama3-tiny-Q8_0.gguf", "kquants/kq-small-Q4_K_M.gguf"}
	eachDevice(t, func(t *testing.T, dev *Backend) {
		for _, rel := range files {
			t.Run(rel, func(t *testing.T) {
				path := shared.Models(t, rel)
				var logits [2][][]float32
				var launches, moved [2]int64
				for i, fuse := range []bool{true, false} {
					b := another(t, dev)
					b.fuse = fuse
					f, err := load.Open(path)
					if err != nil {
						t.Fatal(err)
					}
					defer f.Close()
					m, err := layers.Load(b, f.Config, f.Source, layers.Options{Context: 64, CacheK: dtype.F16, CacheV: dtype.F16})
					if err != nil {
						t.Fatal(err)
					}
					defer m.Close()
					batch, pos := []int32{1, 400, 300, 20, 7}, 0
					for step := range 8 {
						if step == 1 {
							s := b.Stats()
							launches[i], moved[i] = -s.Launches, -s.Moved
						}
						if err := m.Decode(engine.Batch(0, pos, batch)); err != nil {
							t.Fatal(err)
						}
						pos += len(batch)
						row := make([]float32, m.Vocab())
						if err := m.Logits(0, row); err != nil {
							t.Fatal(err)
						}
						logits[i] = append(logits[i], row)
						batch = []int32{int32(sample.Argmax(row))}
					}
					s := b.Stats()
					launches[i] += s.Launches
					moved[i] += s.Moved
				}
				for s := range logits[0] {
					for j := range logits[0][s] {
						if math.Float32bits(logits[0][s][j]) != math.Float32bits(logits[1][s][j]) {
							t.Fatalf("step %d logit %d: fused %v, op by op %v", s, j, logits[0][s][j], logits[1][s][j])
						}
					}
				}
				if launches[0] >= launches[1] {
					t.Errorf("decode: %d launches fused, %d op by op", launches[0], launches[1])
				}
				if moved[0] <= 0 || moved[0] >= moved[1] {
					t.Errorf("decode: %d bytes moved fused, %d op by op", moved[0], moved[1])
				}
				t.Logf("decode: %d launches and %d bytes fused, %d and %d op by op", launches[0], moved[0], launches[1], moved[1])
			})
		}
	})
}

// TestFusedProfile profiles a layer's decode step through
// backend.Profiled: the wrapper must leave the fusing as it is (the fused
// launch count, the bits of an unprofiled run) and charge each launch to
// what it runs, a fused one to its own name.
func TestFusedProfile(t *testing.T) { eachDevice(t, testFusedProfile) }

func testFusedProfile(t *testing.T, dev *Backend) {
	plain := another(t, dev)
	timed := another(t, dev)
	p := backend.Profiled(timed)
	rope := backend.Rope{Dims: 64, Theta: 10000}
	ref := newFusedStep(t, plain, 5, dtype.Q4_K, dtype.Q4_K, 256, 256, 128, 512, 64, dtype.F16, rope)
	s := newFusedStep(t, p, 5, dtype.Q4_K, dtype.Q4_K, 256, 256, 128, 512, 64, dtype.F16, rope)
	ref.run(plain)
	p.Reset()
	before := timed.Stats().Launches
	s.run(p)
	if l := timed.Stats().Launches - before; l != 4 {
		t.Errorf("profiled step: %d launches, want the fused 4", l)
	}
	if err := p.Sync(); err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{
		"fused:norm+matmul×3+rope×2+copy×2": 1,
		"fused:matmul+add":                  2,
		"fused:norm+matmul×2+silu_mul":      1,
	}
	calls, prof := p.Calls(), p.Profile()
	if !maps.Equal(calls, want) {
		t.Errorf("launches charged %v, want %v", calls, want)
	}
	for name := range want {
		if prof[name] <= 0 {
			t.Errorf("%s: device time %v", name, prof[name])
		}
	}
	for name, x := range ref.outputs() {
		got, want := readAll(t, timed, s.outputs()[name]), readAll(t, plain, x)
		for i := range got {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
				t.Fatalf("%s[%d]: profiled %v, not profiled %v", name, i, got[i], want[i])
			}
		}
	}
	// A transfer is timed on its own, after the queued work; disabled, the
	// wrapper charges nothing more.
	p.Reset()
	p.MatMulTransposed(s.o, s.gate, s.wd, 1)
	readAll(t, p, s.o)
	if c := p.Calls(); c[backend.OpTransfer] != 1 || c["fused:matmul"] != 1 || len(c) != 2 {
		t.Errorf("a held matmul and a read: charged %v", c)
	}
	p.Reset()
	p.SetEnabled(false)
	s.run(p)
	if err := p.Sync(); err != nil {
		t.Fatal(err)
	}
	if c := p.Calls(); len(c) != 0 {
		t.Errorf("disabled wrapper charged %v", c)
	}
}
