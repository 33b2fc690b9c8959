package opencl

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/glint-llm/glint/backend"
	"github.com/glint-llm/glint/dtype"
)

// cacheTypes are the BF16 and quantised KV-cache types (kvcache's).
var cacheTypes = []dtype.Type{dtype.BF16, dtype.Q8_0, dtype.Q4_0, dtype.Q4_1, dtype.Q5_0, dtype.Q5_1, dtype.IQ4_NL}

// iq4nlLevels is ggml's kvalues_iq4nl.
var iq4nlLevels = [16]int8{-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113}

// iq4nlBest is ggml's best_index_int8 over IQ4_NL's levels.
func iq4nlBest(x float32) uint8 {
	if x <= float32(iq4nlLevels[0]) {
		return 0
	}
	if x >= float32(iq4nlLevels[15]) {
		return 15
	}
	ml, mu := 0, 15
	for mu-ml > 1 {
		mav := (ml + mu) / 2
		if x < float32(iq4nlLevels[mav]) {
			mu = mav
		} else {
			ml = mav
		}
	}
	if float32(x-float32(iq4nlLevels[mu-1])) < float32(float32(iq4nlLevels[mu])-x) {
		return uint8(mu - 1)
	}
	return uint8(mu)
}

// cacheRowRef is a cache row as llama.cpp's ggml_cpy stores it (the CPU
// type traits' from_float), written from ggml's C: dtype.QuantizeRow for
// BF16 and the _ref quantisers (Q4_0, Q4_1, Q5_0, Q5_1); Q8_0 by the x86
// quantize_row_q8_0 (id = 127/amax, ties to even: dtype's activation
// rounding); IQ4_NL by quantize_row_iq4_nl_ref (ntry −1: d = max/−127, the
// nearest levels, then d = Σwqx/Σwq²), its zero blocks' nibbles the level
// nearest 0.
func cacheRowRef(t dtype.Type, x []float32) []byte {
	n, _ := t.RowBytes(len(x))
	out := make([]byte, n)
	switch t {
	case dtype.Q8_0:
		for b := 0; b < len(x)/32; b++ {
			blk, xb := out[34*b:], x[32*b:32*b+32]
			d, id := dtype.Q8_0Scale(xb)
			binary.LittleEndian.PutUint16(blk, dtype.F32ToF16(d))
			for j, v := range xb {
				blk[2+j] = byte(int8(dtype.RoundEven(float32(v * id))))
			}
		}
	case dtype.IQ4_NL:
		for b := 0; b < len(x)/32; b++ {
			blk, xb := out[18*b:], x[32*b:32*b+32]
			var amax, mx, d float32
			for _, v := range xb {
				if a := float32(math.Abs(float64(v))); a > amax {
					amax, mx = a, v
				}
			}
			var L [32]uint8
			if amax < 1e-15 {
				for j := range L {
					L[j] = iq4nlBest(0)
				}
			} else {
				d0 := float32(mx / float32(iq4nlLevels[0]))
				id := float32(1 / d0)
				var sumqx, sumq2 float32
				for j, v := range xb {
					L[j] = iq4nlBest(float32(id * v))
					q, w := float32(iq4nlLevels[L[j]]), float32(v*v)
					sumqx = float32(sumqx + float32(float32(w*q)*v))
					sumq2 = float32(sumq2 + float32(float32(w*q)*q))
				}
				d = float32(sumqx / sumq2)
			}
			binary.LittleEndian.PutUint16(blk, dtype.F32ToF16(d))
			for j := range 16 {
				blk[2+j] = L[j] | L[j+16]<<4
			}
		}
	default:
		dtype.QuantizeRow(t, out, x)
	}
	return out
}

// cacheVals are rows that exercise the quantisers' edges: an all-zero
// block, a block below GROUP_MAX_EPS, ties of the largest magnitude (the
// first wins), exact halves, a constant block (Q4_1's d = 0), and random
// blocks at several scales.
func cacheVals(rng *rand.Rand, blocks int) []float32 {
	x := make([]float32, 32*blocks)
	for b := 0; b < blocks; b++ {
		xb := x[32*b : 32*b+32]
		switch b {
		case 0:
		case 1:
			for j := range xb {
				xb[j] = float32(j) * 1e-17
			}
		case 2:
			for j := range xb {
				xb[j] = float32(j%5) - 2
			}
			xb[3], xb[9] = 4, -4
		case 3:
			for j := range xb {
				xb[j] = float32(j-16) / 2
			}
		case 4:
			for j := range xb {
				xb[j] = 0.75
			}
		default:
			s := math.Pow(10, float64(b%7-3))
			for j := range xb {
				xb[j] = float32(s * (2*rng.Float64() - 1))
			}
		}
	}
	return x
}

// TestCopySliceCacheTypes holds the append to every BF16 and quantised
// cache to cacheRowRef's bytes, in appends of a few blocks at block-aligned
// offsets, and the read back (a K-shift's) to dtype.DequantizeRow.
func TestCopySliceCacheTypes(t *testing.T) { eachDevice(t, testCopySliceCacheTypes) }

func testCopySliceCacheTypes(t *testing.T, dev *Backend) {
	rng := rand.New(rand.NewPCG(3, 40))
	const blocks = 40
	x := cacheVals(rng, blocks)
	for _, ct := range cacheTypes {
		t.Run(ct.String(), func(t *testing.T) {
			r := rt{t, dev}
			src := r.f32(x, len(x))
			c := r.alloc(ct, len(x)+64)
			// Two appends, the cache offset by two blocks.
			r.b.CopySlice(c, 64, src, 0, 96)
			r.b.CopySlice(c, 64+96, src, 96, len(x)-96)
			back := r.alloc(dtype.F32, len(x))
			r.b.CopySlice(back, 0, c, 64, len(x))
			if err := r.b.Sync(); err != nil {
				t.Fatal(err)
			}
			ct0 := c.(*tensor)
			raw := make([]byte, ct0.bytes)
			if err := r.b.q.Read(ct0.mem, 0, len(raw), ptr(raw)); err != nil {
				t.Fatal(err)
			}
			off, _ := ct.RowBytes(64)
			want := cacheRowRef(ct, x)
			bs, bb := ct.BlockSize(), ct.BlockBytes()
			if ct == dtype.BF16 {
				bs, bb = 32, 64
			}
			bad := 0
			for b := 0; b < len(x)/bs; b++ {
				g, w := raw[off+b*bb:off+(b+1)*bb], want[b*bb:(b+1)*bb]
				if string(g) != string(w) && bad < 5 {
					t.Errorf("block %d: stored % x, want % x", b, g, w)
					bad++
				}
			}
			deq := make([]float32, len(x))
			dtype.DequantizeRow(ct, deq, want)
			got := r.read(back, len(x))
			for i := range deq {
				if math.Float32bits(got[i]) != math.Float32bits(deq[i]) {
					t.Fatalf("read back [%d] = %g, want %g", i, got[i], deq[i])
				}
			}
		})
	}
}

// convertQuery is a query row (heads of hd) as K's vec_dot_type sees it:
// F16 and BF16 rounded, Q8_0 or Q8_1 quantised (dtype.RoundActivations).
func convertQuery(kt dtype.Type, q []float32) []float32 {
	at := kt.ActivationType()
	out := make([]float32, len(q))
	switch at {
	case dtype.F32:
		copy(out, q)
	case dtype.F16:
		for i, v := range q {
			out[i] = dtype.F16ToF32(dtype.F32ToF16(v))
		}
	case dtype.BF16:
		for i, v := range q {
			out[i] = math.Float32frombits(uint32(dtype.F32ToBF16(v)) << 16)
		}
	default:
		dtype.RoundActivations(at, out, q)
	}
	return out
}

// refFlash is attention in float64 over what the caches hold (k, v
// dequantised) with the query as K's vec_dot_type sees it; row i sees
// positions ≤ pos0+i. It returns mag = Σ_j p_j·|v_jd| too.
func refFlash(q, k, v []float32, kraw []byte, kt dtype.Type, n, pos0, heads, kvHeads, hd int, scale, softCap float32) (want, mag []float64) {
	cols, kvCols := heads*hd, kvHeads*hd
	want, mag = make([]float64, n*cols), make([]float64, n*cols)
	for i := range n {
		qc := convertQuery(kt, q[i*cols:(i+1)*cols])
		L := pos0 + i + 1
		for h := range heads {
			kh := h / (heads / kvHeads)
			s := make([]float64, L)
			mx := math.Inf(-1)
			for j := range L {
				var d float64
				for c := range hd {
					d += float64(qc[h*hd+c]) * float64(k[j*kvCols+kh*hd+c])
				}
				if kt.ActivationType() == dtype.Q8_1 {
					d += q81MinTerm(q[i*cols+h*hd:i*cols+(h+1)*hd], qc[h*hd:(h+1)*hd], kraw, kt, j*kvCols+kh*hd)
				}
				if softCap > 0 {
					d = float64(softCap) * math.Tanh(d*float64(scale)/float64(softCap))
				} else {
					d *= float64(scale)
				}
				s[j] = d
				mx = math.Max(mx, d)
			}
			var sum float64
			for j := range s {
				s[j] = math.Exp(s[j] - mx)
				sum += s[j]
			}
			o := i*cols + h*hd
			for j := range s {
				p := s[j] / sum
				for c := range hd {
					vv := float64(v[j*kvCols+kh*hd+c])
					want[o+c] += p * vv
					mag[o+c] += p * math.Abs(vv)
				}
			}
		}
	}
	return want, mag
}

// heldCache fills a cache of type dt with vals (CopySlice appends) and
// returns the values it holds, dequantised by dtype.
func (r rt) heldCache(dt dtype.Type, vals []float32, cells, kvHeads, hd int) (backend.Tensor, []float32) {
	r.t.Helper()
	if dt == dtype.F32 || dt == dtype.F16 {
		return r.cache(dt, vals, cells, kvHeads, hd)
	}
	c := r.alloc(dt, cells, kvHeads, hd)
	r.b.CopySlice(c, 0, r.f32(vals, len(vals)), 0, len(vals))
	held := make([]float32, len(vals))
	dtype.DequantizeRow(dt, held, cacheRowRef(dt, vals))
	return c, held
}

// TestFlashAttention runs flash attention over every K type × V type
// against refFlash: decode and a prompt's rows, grouped-query heads, a
// soft cap, and the flash-decoding split. The tolerance, of Σ p·|v|: 1e-5
// where the accumulator is f32 (float32 scores, e^x and sums, as the
// non-flash kernels); over an F16 V, whose accumulator llama.cpp rounds to
// f16 after every cell, half an f16 ulp (2^-11 relative) per cell seen. It
// also checks that a prompt's rows give the bits of the same rows decoded
// one at a time (llama.cpp's flash arithmetic is per row), and with Decode
// set the same again. A device after the first runs K and V of one type only.
func TestFlashAttention(t *testing.T) { eachDevice(t, testFlashAttention) }

func testFlashAttention(t *testing.T, dev *Backend) {
	b := dev
	// A second device (llvmpipe, ~30× slower) runs K and V of one type.
	second := testDevices(t)[0].d.info.Index != dev.info.Index
	type fc struct {
		n, pos0, heads, kvHeads, hd, parts int
		softCap                            float32
	}
	cases := []fc{{1, 6, 4, 2, 32, 0, 0}, {3, 2, 4, 2, 32, 0, 0}, {1, 40, 2, 1, 32, 3, 0}, {2, 4, 2, 2, 64, 0, 30}}
	types := append([]dtype.Type{dtype.F32, dtype.F16}, cacheTypes...)
	rng := rand.New(rand.NewPCG(4, 40))
	for _, c := range cases {
		for _, kt := range types {
			for _, vt := range types {
				if second && vt != kt {
					continue
				}
				name := fmt.Sprintf("n%d/pos%d/h%d/kv%d/d%d/parts%d/cap%g/K%v/V%v", c.n, c.pos0, c.heads, c.kvHeads, c.hd, c.parts, c.softCap, kt, vt)
				t.Run(name, func(t *testing.T) {
					r := rt{t, b}
					cols, kvCols := c.heads*c.hd, c.kvHeads*c.hd
					cells := c.pos0 + c.n
					q := randRange(rng, c.n*cols, -3, 3)
					kv := randRange(rng, cells*kvCols, -1, 1)
					vv := randRange(rng, cells*kvCols, -1, 1)
					qt := r.f32(q, c.n, cols)
					kc, kh := r.heldCache(kt, kv, cells, c.kvHeads, c.hd)
					vc, vh := r.heldCache(vt, vv, cells, c.kvHeads, c.hd)
					o := r.alloc(dtype.F32, c.n, cols)
					scale := float32(1 / math.Sqrt(float64(c.hd)))
					a := backend.Attn{Heads: c.heads, KVHeads: c.kvHeads, HeadDim: c.hd, Scale: scale, SoftCap: c.softCap, Flash: true}
					b.attnParts = c.parts
					split := b.attnPartitions(c.n, c.pos0+1, c.heads) > 1
					view := causal(t, b, c.n, c.pos0)
					before := b.Stats().Launches
					b.Attention(o, qt, kc, vc, c.n, view, a)
					launches := b.Stats().Launches - before
					b.attnParts = 0
					// flash_attn, the query's conversion unless K is F32 or F16,
					// flash_merge after a split.
					wantL := int64(1 + b01(kt != dtype.F32 && kt != dtype.F16) + b01(split))
					if launches != wantL {
						t.Errorf("%d launches, want %d", launches, wantL)
					}
					got := r.read(o, c.n*cols)
					want, mag := refFlash(q, kh, vh, cacheRowRef(kt, kv), kt, c.n, c.pos0, c.heads, c.kvHeads, c.hd, scale, c.softCap)
					tol := 1e-5
					if vt == dtype.F16 {
						tol += float64(cells) * 0x1p-11
					}
					bad := 0
					for i := range want {
						if d := math.Abs(float64(got[i]) - want[i]); !(d <= tol*mag[i]) {
							if bad < 5 {
								t.Errorf("out[%d] = %g, want %g (|Δ| %.3g > %.3g)", i, got[i], want[i], d, tol*mag[i])
							}
							bad++
						}
					}
					if bad > 0 {
						t.Fatalf("%d of %d outside tolerance", bad, len(want))
					}
					if c.n == 1 {
						return
					}
					// Each row again, alone, then all with Decode: the same bits.
					for i := range c.n {
						oi := r.alloc(dtype.F32, 1, cols)
						qi := r.f32(q[i*cols:(i+1)*cols], 1, cols)
						b.Attention(oi, qi, kc, vc, 1, causal(t, b, 1, c.pos0+i), a)
						for j, g := range r.read(oi, cols) {
							if math.Float32bits(g) != math.Float32bits(got[i*cols+j]) {
								t.Fatalf("row %d alone: out[%d] = %g, batched %g", i, j, g, got[i*cols+j])
							}
						}
					}
					view.Decode = true
					od := r.alloc(dtype.F32, c.n, cols)
					b.Attention(od, qt, kc, vc, c.n, view, a)
					for j, g := range r.read(od, c.n*cols) {
						if math.Float32bits(g) != math.Float32bits(got[j]) {
							t.Fatalf("Decode: out[%d] = %g, without %g", j, g, got[j])
						}
					}
				})
			}
		}
	}
}

// q81MinTerm is what ggml's Q4_1 and Q5_1 dot products with a Q8_1 query
// add beyond the dequantised values' products: each K block's min m times
// the Q8_1 block sum s = f16(amax/127·Σq) (dtype.Q8_1Sum), where the values
// give m·Σ x_q. x is the query head before rounding, xq after, kraw the
// stored K cache and at the element of the head's first value.
func q81MinTerm(x, xq []float32, kraw []byte, kt dtype.Type, at int) float64 {
	var t float64
	for b := 0; b < len(x)/32; b++ {
		var sum float64
		for _, v := range xq[32*b : 32*b+32] {
			sum += float64(v)
		}
		blk := kraw[(at/32+b)*kt.BlockBytes():]
		m := float64(dtype.F16ToF32(binary.LittleEndian.Uint16(blk[2:])))
		t += m * (float64(dtype.Q8_1Sum(x[32*b:32*b+32])) - sum)
	}
	return t
}

// TestFlashMatchesCPU holds flash attention at Llama 3.2 1B's attention
// shape (32 query heads over 8 KV heads: groups of 4, head size 64) to the
// CPU backend's flash path, which is llama.cpp's
// ggml_compute_forward_flash_attn_ext_f16 bit for bit: a 5-row prompt, then
// single decode rows over 6 to 40 cells and a few longer views, for the
// cache type pairs llama.cpp's -ctk/-ctv users run. No view here is longer
// than attChunk cells, so none is split (the split's merge is only within a
// few ulp), and every bit must agree: the F16 accumulator's roundings, the
// softmax sum's two roundings and glibc's expf (whose misroundings, a few
// in 10^4, this many weights meet) included.
func TestFlashMatchesCPU(t *testing.T) { eachDevice(t, testFlashMatchesCPU) }

func testFlashMatchesCPU(t *testing.T, dev *Backend) {
	const heads, kvHeads, hd, cells = 32, 8, 64, 256
	cols, kvCols := heads*hd, kvHeads*hd
	pairs := [][2]dtype.Type{{dtype.F16, dtype.F16}, {dtype.Q8_0, dtype.F16}, {dtype.Q8_0, dtype.Q8_0}, {dtype.Q4_0, dtype.Q4_0}}
	// Each step: n rows from position pos0 (the prompt, then decode rows).
	type step struct{ n, pos0 int }
	steps := []step{{5, 0}}
	for p := 5; p < 40; p++ {
		steps = append(steps, step{1, p})
	}
	steps = append(steps, step{1, 63}, step{1, 64}, step{1, 100}, step{1, 200})
	// Without fp64 the kernel's e^x is OpenCL's exp, not glibc's expf (flash.cl:
	// fa_expf): a weight may then differ in its last bit, which an f16
	// accumulator can carry to f16 steps of its running sum (2⁻¹¹ of the
	// values' range, ±1 here, each): 2e-3 absolute.
	exact := dev.Info().FP64
	c := cpuBackend()
	for _, pr := range pairs {
		kt, vt := pr[0], pr[1]
		t.Run(fmt.Sprintf("K%v/V%v", kt, vt), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(5, 40))
			kv := randRange(rng, cells*kvCols, -1, 1)
			vv := randRange(rng, cells*kvCols, -1, 1)
			// Both backends' caches, filled as kvcache fills them: one
			// CopySlice append of F32 rows per position.
			var cache [2][2]backend.Tensor
			for i, be := range []backend.Backend{c, dev} {
				for j, x := range [][]float32{kv, vv} {
					dt := [2]dtype.Type{kt, vt}[j]
					ct, err := be.Alloc(dt, cells, kvHeads, hd)
					if err != nil {
						t.Fatal(err)
					}
					src, err := be.Alloc(dtype.F32, cells, kvCols)
					if err != nil {
						t.Fatal(err)
					}
					if err := be.WriteF32(src, 0, x); err != nil {
						t.Fatal(err)
					}
					for p := range cells {
						be.CopySlice(ct, p*kvCols, src, p*kvCols, kvCols)
					}
					be.Free(src)
					cache[i][j] = ct
					t.Cleanup(func() { be.Free(ct) })
				}
			}
			a := backend.Attn{Heads: heads, KVHeads: kvHeads, HeadDim: hd, Scale: 1.0 / 8, Flash: true}
			for _, s := range steps {
				if dev.attnPartitions(s.n, s.pos0+s.n, heads) > 1 {
					t.Fatalf("%d cells split on %s", s.pos0+s.n, dev.info.Name)
				}
				q := randRange(rng, s.n*cols, -3, 3)
				var outs [2][]float32
				for i, be := range []backend.Backend{c, dev} {
					qt, err := be.Alloc(dtype.F32, s.n, cols)
					if err != nil {
						t.Fatal(err)
					}
					o, err := be.Alloc(dtype.F32, s.n, cols)
					if err != nil {
						t.Fatal(err)
					}
					if err := be.WriteF32(qt, 0, q); err != nil {
						t.Fatal(err)
					}
					be.Attention(o, qt, cache[i][0], cache[i][1], s.n, causal(t, be, s.n, s.pos0), a)
					if err := be.Sync(); err != nil {
						t.Fatal(err)
					}
					outs[i] = make([]float32, s.n*cols)
					if err := be.ReadF32(o, 0, outs[i]); err != nil {
						t.Fatal(err)
					}
					be.Free(qt)
					be.Free(o)
				}
				bad := 0
				for e, w := range outs[0] {
					g := outs[1][e]
					differ := math.Float32bits(g) != math.Float32bits(w)
					if !exact {
						differ = math.Abs(float64(g-w)) > 2e-3
					}
					if differ {
						if bad < 3 {
							row, h := e/cols, e%cols/hd
							t.Errorf("%d rows at %d: row %d head %d [%d] = %g, CPU %g", s.n, s.pos0, row, h, e%hd, g, w)
						}
						bad++
					}
				}
				if bad > 0 {
					t.Fatalf("%d rows at %d: %d of %d differ from the CPU's", s.n, s.pos0, bad, len(outs[0]))
				}
			}
		})
	}
}
