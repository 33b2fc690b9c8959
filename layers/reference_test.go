package layers_test

import (
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/glint-llm/glint/backend/cpu"
	"github.com/glint-llm/glint/dtype"
	"github.com/glint-llm/glint/layers"
	"github.com/glint-llm/glint/model"
	"github.com/glint-llm/glint/model/load"
	"github.com/glint-llm/glint/model/synth"
)

// refModel is an independent float64 forward pass of every architecture
// glint runs, written from the models' definitions (transformers' modeling
// code; GELU as llama.cpp's CPU build takes it, see refGELU) in plain loops
// over the file's weights: the reference the layers are checked against
// where llama.cpp cannot read the model (Qwen 3, Gemma 3), and for every
// other architecture too.
type refModel struct {
	c    model.Config
	w    map[string][]float64 // GGUF name → dequantised values
	k, v [][][]float64        // [layer][pos] cached K and V rows
}

func newRef(t *testing.T, f *load.File) *refModel {
	t.Helper()
	r := &refModel{c: f.Config, w: map[string][]float64{}}
	for _, ts := range f.Config.TensorShapes() {
		td, err := f.Source.Tensor(ts.Name)
		if err != nil {
			t.Fatal(err)
		}
		rows, cols := 1, td.Shape[len(td.Shape)-1]
		if len(td.Shape) == 2 {
			rows = td.Shape[0]
		}
		rb, err := td.Type.RowBytes(cols)
		if err != nil {
			t.Fatal(err)
		}
		out, row := make([]float64, 0, rows*cols), make([]float32, cols)
		for i := range rows {
			dtype.DequantizeRow(td.Type, row, td.Data[i*rb:(i+1)*rb])
			for _, v := range row {
				out = append(out, float64(v))
			}
		}
		r.w[ts.Name] = out
	}
	r.k, r.v = make([][][]float64, f.Config.NLayer), make([][][]float64, f.Config.NLayer)
	return r
}

// get returns a weight, or nil when the model has none of that name.
func (r *refModel) get(name string) []float64 { return r.w[name] }

// matvec is W·x (+ b) for W [rows, len(x)].
func matvec(w, x, b []float64) []float64 {
	cols := len(x)
	out := make([]float64, len(w)/cols)
	for o := range out {
		var s float64
		for j, xv := range x {
			s += w[o*cols+j] * xv
		}
		if b != nil {
			s += b[o]
		}
		out[o] = s
	}
	return out
}

func rmsNorm(x, w []float64, eps float64) []float64 {
	var ss float64
	for _, v := range x {
		ss += v * v
	}
	s := 1 / math.Sqrt(ss/float64(len(x))+eps)
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = v * s * w[i]
	}
	return out
}

func layerNorm(x, w, b []float64, eps float64) []float64 {
	var mean, vr float64
	for _, v := range x {
		mean += v
	}
	mean /= float64(len(x))
	for _, v := range x {
		vr += (v - mean) * (v - mean)
	}
	s := 1 / math.Sqrt(vr/float64(len(x))+eps)
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = (v-mean)*s*w[i] + b[i]
	}
	return out
}

// refGELU is GELU's tanh form as llama.cpp's CPU build applies it: its
// argument rounded to f16 and its result rounded to f16 (ggml's table),
// both inside (−10, 10).
func refGELU(x float64) float64 {
	switch {
	case x <= -10:
		return 0
	case x >= 10:
		return x
	}
	h := float64(dtype.F16ToF32(dtype.F32ToF16(float32(x))))
	g := 0.5 * h * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(h+0.044715*h*h*h)))
	return float64(dtype.F16ToF32(dtype.F32ToF16(float32(g))))
}

func silu(x float64) float64 { return x / (1 + math.Exp(-x)) }

// split cuts a fused matrix (or bias) into parts of the given rows.
func split(w []float64, cols int, rows ...int) [][]float64 {
	var out [][]float64
	for _, r := range rows {
		out = append(out, w[:r*cols])
		w = w[r*cols:]
	}
	return out
}

func (r *refModel) norm(x []float64, name string) []float64 {
	if r.c.LayerNorm {
		return layerNorm(x, r.get(name+".weight"), r.get(name+".bias"), float64(r.c.RMSEps))
	}
	return rmsNorm(x, r.get(name+".weight"), float64(r.c.RMSEps))
}

// rope rotates each head of x at position pos: pair i by
// scale·pos·base^(−2i/dims)/f_i (scale: linear scaling, 1 when 0), pairs
// (i, i+dims/2) for NeoX, else (2i, 2i+1), cos and sin times LongRoPE's
// attention factor.
func (r *refModel) rope(x []float64, heads, pos int, base, scale float64) {
	c := r.c
	var freqs []float64
	for _, n := range []string{"rope_freqs.weight", "rope_factors_short.weight"} {
		if f := r.get(n); f != nil {
			freqs = f
		}
	}
	half := c.RopeDims / 2
	for h := range heads {
		v := x[h*c.HeadDim : (h+1)*c.HeadDim]
		for i := range half {
			theta := float64(pos) * math.Pow(base, -2*float64(i)/float64(c.RopeDims))
			if freqs != nil {
				theta /= freqs[i]
			}
			if scale > 0 {
				theta *= scale
			}
			a, b := 2*i, 2*i+1
			if c.RopeNeoX {
				a, b = i, i+half
			}
			cs, sn := math.Cos(theta), math.Sin(theta)
			if m := float64(c.RopeAttnFactor); m > 0 {
				cs, sn = cs*m, sn*m
			}
			v[a], v[b] = v[a]*cs-v[b]*sn, v[a]*sn+v[b]*cs
		}
	}
}

// step runs token id at position pos and returns the logits.
func (r *refModel) step(id int32, pos int) []float64 {
	h := r.hidden(id, pos)
	out := r.get("output.weight")
	if out == nil {
		out = r.get("token_embd.weight")
	}
	logits := matvec(out, h, nil)
	if cp := float64(r.c.FinalSoftCap); cp > 0 {
		for i, v := range logits {
			logits[i] = cp * math.Tanh(v/cp)
		}
	}
	return logits
}

// hidden runs token id at position pos and returns its final hidden state
// after the output norm (what the LM head reads, and an embedding is
// made of).
func (r *refModel) hidden(id int32, pos int) []float64 {
	c := r.c
	e, hd, q, kv := c.NEmbd, c.HeadDim, c.NHead*c.HeadDim, c.NHeadKV*c.HeadDim
	x := append([]float64(nil), r.get("token_embd.weight")[int(id)*e:(int(id)+1)*e]...)
	if c.EmbedScale > 0 {
		for i := range x {
			x[i] *= math.Sqrt(float64(e))
		}
	}
	if p := r.get("position_embd.weight"); p != nil {
		for i := range x {
			x[i] += p[pos*e+i]
		}
	}
	for il := range c.NLayer {
		b := fmt.Sprintf("blk.%d.", il)
		h := r.norm(x, b+"attn_norm")
		var wq, wk, wv, bq, bk, bv []float64
		if w := r.get(b + "attn_qkv.weight"); w != nil {
			p := split(w, e, q, kv, kv)
			wq, wk, wv = p[0], p[1], p[2]
			if bb := r.get(b + "attn_qkv.bias"); bb != nil {
				p = split(bb, 1, q, kv, kv)
				bq, bk, bv = p[0], p[1], p[2]
			}
		} else {
			wq, wk, wv = r.get(b+"attn_q.weight"), r.get(b+"attn_k.weight"), r.get(b+"attn_v.weight")
			bq, bk, bv = r.get(b+"attn_q.bias"), r.get(b+"attn_k.bias"), r.get(b+"attn_v.bias")
		}
		qv, kvv, vv := matvec(wq, h, bq), matvec(wk, h, bk), matvec(wv, h, bv)
		if qn := r.get(b + "attn_q_norm.weight"); qn != nil {
			kn := r.get(b + "attn_k_norm.weight")
			for i := 0; i < q; i += hd {
				copy(qv[i:i+hd], rmsNorm(qv[i:i+hd], qn, float64(c.RMSEps)))
			}
			for i := 0; i < kv; i += hd {
				copy(kvv[i:i+hd], rmsNorm(kvv[i:i+hd], kn, float64(c.RMSEps)))
			}
		}
		sliding := c.Sliding(il)
		if !c.NoRoPE {
			base := float64(c.RopeTheta)
			if sliding && c.RopeThetaSWA > 0 {
				base = float64(c.RopeThetaSWA)
			}
			scale := float64(c.LayerRopeFreqScale(il))
			r.rope(qv, c.NHead, pos, base, scale)
			r.rope(kvv, c.NHeadKV, pos, base, scale)
		}
		r.k[il], r.v[il] = append(r.k[il], kvv), append(r.v[il], vv)
		// Gemma and Phi-3 scale q by their query scale, the others the
		// scores by 1/√headDim: the same product.
		scale := 1 / math.Sqrt(float64(hd))
		if c.QueryScale > 0 {
			scale = float64(c.QueryScale)
		}
		att := make([]float64, q)
		for hh := range c.NHead {
			g := hh / (c.NHead / c.NHeadKV)
			qh := qv[hh*hd : (hh+1)*hd]
			scores := make([]float64, pos+1)
			mx := math.Inf(-1)
			for j := range pos + 1 {
				scores[j] = math.Inf(-1)
				if sliding && pos-j >= c.SlidingWindow {
					continue
				}
				var s float64
				for d, qd := range qh {
					s += qd * r.k[il][j][g*hd+d]
				}
				// Gemma 2 caps the scaled score (transformers: scaling, then
				// softcap·tanh(s/softcap)).
				s *= scale
				if c.AttnSoftCap > 0 {
					s = float64(c.AttnSoftCap) * math.Tanh(s/float64(c.AttnSoftCap))
				}
				scores[j] = s
				mx = math.Max(mx, scores[j])
			}
			var sum float64
			for j := range scores {
				scores[j] = math.Exp(scores[j] - mx)
				sum += scores[j]
			}
			for j, p := range scores {
				for d := range hd {
					att[hh*hd+d] += p / sum * r.v[il][j][g*hd+d]
				}
			}
		}
		o := matvec(r.get(b+"attn_output.weight"), att, r.get(b+"attn_output.bias"))
		if pn := r.get(b + "post_attention_norm.weight"); pn != nil {
			o = rmsNorm(o, pn, float64(c.RMSEps))
		}
		for i := range x {
			x[i] += o[i]
		}
		h = r.norm(x, b+"ffn_norm")
		var act []float64
		switch {
		case c.NoGate:
			act = matvec(r.get(b+"ffn_up.weight"), h, r.get(b+"ffn_up.bias"))
			for i, v := range act {
				act[i] = refGELU(v)
			}
		default:
			wg, wu := r.get(b+"ffn_gate.weight"), r.get(b+"ffn_up.weight")
			if c.FusedGateUp {
				p := split(wu, e, c.NFF, c.NFF)
				wg, wu = p[0], p[1]
			}
			gate, up := matvec(wg, h, nil), matvec(wu, h, nil)
			act = make([]float64, c.NFF)
			for i := range act {
				if c.GELU {
					act[i] = refGELU(gate[i]) * up[i]
				} else {
					act[i] = silu(gate[i]) * up[i]
				}
			}
		}
		f := matvec(r.get(b+"ffn_down.weight"), act, r.get(b+"ffn_down.bias"))
		if pn := r.get(b + "post_ffw_norm.weight"); pn != nil {
			f = rmsNorm(f, pn, float64(c.RMSEps))
		}
		for i := range x {
			x[i] += f[i]
		}
	}
	return r.norm(x, "output_norm")
}

// archShape is the synthetic shape each architecture is tested on: tiny,
// but Gemma 2's must have 26 layers for llama.cpp to read it, and Gemma 3
// needs six to have a global layer.
func archShape(arch string) string {
	switch arch {
	case "gemma2":
		return "gemma2-tiny"
	case "gemma3":
		return "gemma3-tiny" // five sliding layers and a global one
	}
	return "tiny"
}

// synthArch writes an F32 model of an architecture at std 0.05 (as the
// llama.cpp comparisons use) and returns its path.
func synthArch(t testing.TB, arch, typ string, hf bool) string {
	t.Helper()
	o := synth.Options{Arch: arch, Shape: archShape(arch), Type: typ, Seed: 7, Std: 0.05}
	p := filepath.Join(t.TempDir(), arch+"-"+typ)
	var err error
	if hf {
		err = synth.WriteHF(p, o)
	} else {
		p += ".gguf"
		err = synth.WriteGGUF(p, o)
	}
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// Every architecture's layers against the float64 reference, on the CPU
// with F32 weights and an F32 KV cache, from a 12-token prompt (longer than
// the sliding window of 8, so that windowed layers drop positions) through
// 4 decode steps. The difference is float32 rounding (≲ 1e-6 relative) and,
// where GELU's f16 rounding meets a value that float32 and float64 round to
// neighbouring f16s, a step of 2⁻¹¹ in one activation, each moving the
// logits by up to ~1e-4; such flips add up with depth (26-layer Gemma 2:
// 2.3e-4 of the logits' scale measured), so 5e-4 of the scale bounds them.
func TestArchitecturesVsFloat64Reference(t *testing.T) {
	for _, arch := range model.Archs {
		t.Run(arch, func(t *testing.T) {
			path := synthArch(t, arch, "F32", false)
			f, err := load.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			ref := newRef(t, f)
			b := cpu.New(2)
			defer b.Close()
			m, err := layers.Load(b, f.Config, f.Source, layers.Options{Context: 64, CacheK: dtype.F32, CacheV: dtype.F32})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			prompt := []int32{1, 17, 42, 99, 7, 250, 3, 64, 128, 5, 11, 300}
			var want []float64
			for i, id := range prompt {
				want = ref.step(id, i)
			}
			batch := prompt
			st := &stream{m: m}
			var worst, scale float64
			for step := range 5 {
				if err := st.eval(batch); err != nil {
					t.Fatal(err)
				}
				got := st.logits(t)
				var diff, sc float64
				best := 0
				for i, w := range want {
					diff = math.Max(diff, math.Abs(float64(got[i])-w))
					sc = math.Max(sc, math.Abs(w))
					if w > want[best] {
						best = i
					}
				}
				worst, scale = math.Max(worst, diff), math.Max(scale, sc)
				if diff > 5e-4*sc {
					t.Errorf("step %d: max |Δlogit| %.3g against the reference (scale %.3g)", step, diff, sc)
				}
				next := int32(best)
				want = ref.step(next, len(prompt)+step)
				batch = []int32{next}
			}
			t.Logf("%s: worst |Δlogit| %.3g, logit scale %.3g", arch, worst, scale)
			if strings.HasPrefix(arch, "gemma") && f.Config.SlidingWindow >= len(prompt) {
				t.Errorf("the window %d does not drop any of %d positions", f.Config.SlidingWindow, len(prompt))
			}
		})
	}
}
