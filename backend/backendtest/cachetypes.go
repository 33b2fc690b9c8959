package backendtest

import (
	"fmt"
	"math"

	"github.com/glint-llm/glint/backend"
	"github.com/glint-llm/glint/dtype"
)

// CacheCase is one pair of KV-cache types and an attention path
// (backend.Attn.Flash) that every backend runs in the conformance suite.
type CacheCase struct {
	K, V  dtype.Type
	Flash bool
}

func (c CacheCase) String() string {
	path := "mul_mat"
	if c.Flash {
		path = "flash"
	}
	return fmt.Sprintf("K %v V %v %s", c.K, c.V, path)
}

// AttentionCaches are the cases of AttentionCacheTypes: the float caches on
// both paths, every cache type as K and V with flash attention, and mixed
// pairs (a block K over a float V and the reverse, two block types).
var AttentionCaches = func() []CacheCase {
	var cs []CacheCase
	for _, flash := range []bool{false, true} {
		for _, kv := range [][2]dtype.Type{{dtype.F32, dtype.F32}, {dtype.F16, dtype.F16}, {dtype.F16, dtype.F32}} {
			cs = append(cs, CacheCase{kv[0], kv[1], flash})
		}
	}
	for _, t := range dtype.CacheTypes {
		cs = append(cs, CacheCase{t, t, true})
	}
	return append(cs, CacheCase{dtype.Q8_0, dtype.F16, true}, CacheCase{dtype.F16, dtype.Q4_0, true},
		CacheCase{dtype.Q4_1, dtype.IQ4_NL, true}, CacheCase{dtype.Q5_1, dtype.Q5_0, true}, CacheCase{dtype.BF16, dtype.Q8_0, true})
}()

// testAttentionCacheTypes runs every AttentionCaches case over decode
// steps, causal batches and the views of several sequences (windows, soft
// caps, rows that see nothing), head sizes 32 and 64 (block types store
// whole 32-element blocks).
func testAttentionCacheTypes(h *harness) {
	type geo struct{ heads, kvHeads, hd int }
	var views []attnCase
	for _, c := range []struct{ n, pos0 int }{{1, 0}, {1, 37}, {1, 300}, {5, 0}, {17, 20}} {
		views = append(views, attnCase{name: "causal", view: Causal(c.n, c.pos0), cells: c.pos0 + c.n + 3})
	}
	views = append(views, attentionViews(h)...)
	for _, cc := range AttentionCaches {
		for i, vc := range views {
			g := []geo{{4, 2, 32}, {8, 1, 64}}[i%2]
			c := vc
			c.heads, c.kvHeads, c.hd, c.kt, c.vt, c.flash = g.heads, g.kvHeads, g.hd, cc.K, cc.V, cc.Flash
			if c.softCap > 0 && cc.Flash {
				// ggml's flash_attn_ext caps the scaled score, which equals
				// the mul_mat graph's capped-then-scaled one at scale 1 (how
				// llama.cpp's graphs use a soft cap: Gemma 2 scales q first).
				c.unitScale = true
			}
			h.runAttention(c)
		}
	}
}

// cacheOf stores the F32 values c as a cache of type dt ([cells, kvHeads,
// hd], through CopySlice, as kvcache stores rows) and returns it with the
// values it holds (the type's rounding, or its quantisation as llama.cpp
// stores a cache row, dequantised: dtype.QuantizeCacheRow) and, for Q4_1
// and Q5_1, each block's min (the Q8_1 dot's block sums meet it).
func (h *harness) cacheOf(dt dtype.Type, c []float32, cells, kvHeads, hd int) (backend.Tensor, []float32, []float32) {
	if dt == dtype.F32 {
		return h.f32(c, cells, kvHeads, hd), c, nil
	}
	st := h.f32(c, cells, kvHeads, hd)
	t := h.alloc(dt, cells, kvHeads, hd)
	h.be.CopySlice(t, 0, st, 0, len(c))
	h.be.Free(st)
	raw := make([]byte, mustRowBytes(dt, len(c)))
	dtype.QuantizeCacheRow(dt, raw, c)
	held := make([]float32, len(c))
	dtype.DequantizeRow(dt, held, raw)
	var mins []float32
	if dt == dtype.Q4_1 || dt == dtype.Q5_1 {
		mins = make([]float32, len(c)/32)
		for b := range mins {
			blk := raw[b*dt.BlockBytes():]
			mins[b] = dtype.F16ToF32(uint16(blk[2]) | uint16(blk[3])<<8)
		}
	}
	return t, held, mins
}

func mustRowBytes(dt dtype.Type, n int) int {
	b, err := dt.RowBytes(n)
	if err != nil {
		panic(err)
	}
	return b
}

// refFlash is attention over caches holding k and v (their stored values)
// as flash attention computes it, in float64: the query rounded to K's
// vec_dot_type (dtype.RoundActivations; F32 K: none), s = q·k·scale, soft
// capped after the scale (softCap·tanh(s/softCap), ggml's flash order), the
// softmax in float64 over the visible cells in increasing order, and the
// probabilities weighting v unrounded. Besides the result it returns the
// bounds its tolerance is made of, per output:
//
//   - mag = Σ_j p_j·|v_j|: float32 rounding of the sums (attnTol·mag);
//   - sens = mag·2·E, E the largest score error the backend may make beyond
//     float32 rounding: with Q4_1 or Q5_1 K, the Q8_1 dot adds min·s per
//     block, s the block's sum rounded to f16 (error ≤ 2⁻¹¹·|s|); a score
//     off by ≤ E moves each p_j by ≤ 2E·p_j;
//   - acc: over an F16 V, the f16 accumulator's roundings (two per cell:
//     the rescale and the multiply-add, each ≤ 2⁻¹¹ of the value rounded),
//     carried through the later rescales and divided by the final sum.
func refFlash(q, k, v, kMins []float32, n, heads, kvHeads, hd int, kt, vt dtype.Type, scale, softCap float32, visible func(i int) []int) (want, mag, sens, acc []float64) {
	cols, kvCols := heads*hd, kvHeads*hd
	want, mag, sens, acc = make([]float64, n*cols), make([]float64, n*cols), make([]float64, n*cols), make([]float64, n*cols)
	qr := append([]float32(nil), q...)
	if at := kt.ActivationType(); at != dtype.F32 {
		dtype.RoundActivations(at, qr, q)
	}
	for i := range n {
		cells := visible(i)
		if len(cells) == 0 {
			continue
		}
		for hh := range heads {
			kh := hh / (heads / kvHeads)
			qo := i*cols + hh*hd
			s := make([]float64, len(cells))
			var e float64
			for jj, j := range cells {
				var d float64
				ko := j*kvCols + kh*hd
				for c := range hd {
					d += float64(qr[qo+c]) * float64(k[ko+c])
				}
				if kMins != nil {
					var ej float64
					for b := 0; b < hd; b += 32 {
						var sb float64
						for c := b; c < b+32; c++ {
							sb += float64(qr[qo+c])
						}
						ej += math.Abs(float64(kMins[(ko+b)/32])) * 0x1p-11 * math.Abs(sb)
					}
					e = math.Max(e, ej*float64(scale))
				}
				x := d * float64(scale)
				if softCap > 0 {
					x = float64(softCap) * math.Tanh(x/float64(softCap))
				}
				s[jj] = x
			}
			// The online softmax in float64, to carry the f16 bound along.
			m, sum := math.Inf(-1), 0.0
			out := make([]float64, hd)
			bound := make([]float64, hd)
			for jj, j := range cells {
				ms, vs := 1.0, 1.0
				if s[jj] > m {
					ms = math.Exp(m - s[jj])
					m = s[jj]
				} else {
					vs = math.Exp(s[jj] - m)
				}
				sum = sum*ms + vs
				vo := j*kvCols + kh*hd
				for c := range hd {
					out[c] = out[c]*ms + vs*float64(v[vo+c])
					bound[c] = bound[c]*ms + 0x1p-11*(2*math.Abs(out[c])+vs*math.Abs(float64(v[vo+c])))
				}
			}
			for c := range hd {
				o := qo + c
				want[o] = out[c] / sum
				for jj, j := range cells {
					p := math.Exp(s[jj]-m) / sum
					mag[o] += p * math.Abs(float64(v[j*kvCols+kh*hd+c]))
				}
				sens[o] = 2 * e * mag[o]
				if vt == dtype.F16 {
					acc[o] = bound[c] / sum
				}
			}
		}
	}
	return want, mag, sens, acc
}
