package onnxtest

import (
	"fmt"
	"math"
	"math/rand/v2"
)

// Gemma3 describes a Gemma 3 text model for WriteGemma3: its
// hyper-parameters (config.json's) and its weights.
type Gemma3 struct {
	Vocab, Hidden, Layers, QHeads, KVHeads, HeadDim, FF int
	RMSEps                                              float32
	// RopeTheta is the global layers' RoPE base, RopeLocalTheta the sliding
	// layers'; Window and Pattern the sliding window and its period (layer
	// il slides when il mod Pattern < Pattern−1).
	RopeTheta, RopeLocalTheta float64
	Window, Pattern           int
	QueryPreAttnScalar        float64
	// RopeFactor, when above 1, is the global layers' linear RoPE scaling
	// (transformers divides their inv_freq by it).
	RopeFactor float64
	// Weight returns a tensor by its Hugging Face name
	// ("model.layers.0.self_attn.q_proj.weight"): matrices [out, in]
	// row-major; norms as Hugging Face stores them, w (applied as 1 + w).
	Weight func(name string) ([]float32, error)
}

// WriteGemma3 writes a faithful Gemma 3 text decoder (transformers'
// Gemma3ForCausalLM in float32) to path, with the ONNX signature
// WriteGemmaLike's models have (input_ids, attention_mask, position_ids,
// past_key_values.N.key/value → logits, present.N.key/value): embeddings
// scaled by √hidden, RMSNorms x·rsqrt(mean(x²)+eps)·(1+w) before and after
// attention and the FFN, per-head RMSNorms of q and k, NeoX RoPE from
// position_ids with each layer's base, scores scaled by
// query_pre_attn_scalar^−½ and masked causally and, on sliding layers, to the
// window, grouped-query attention, a GeGLU FFN (tanh GELU), and the LM head
// tied to the embedding. external, when not empty, is the file the weights
// go to (ONNX external data).
func WriteGemma3(path, external string, g Gemma3) error {
	m, err := buildGemma3(&g)
	if err != nil {
		return err
	}
	return m.Write(path, external)
}

func buildGemma3(o *Gemma3) (*Model, error) {
	if o.QHeads%o.KVHeads != 0 || o.HeadDim%2 != 0 || o.Pattern < 0 {
		return nil, fmt.Errorf("onnxtest: Gemma 3 with %d heads, %d KV heads of %d, pattern %d", o.QHeads, o.KVHeads, o.HeadDim, o.Pattern)
	}
	b := &builder{g: &Graph{Name: "gemma3"}, rng: rand.New(rand.NewPCG(0, 0))}
	D, hd, V := int64(o.Hidden), int64(o.HeadDim), int64(o.Vocab)
	QH, KVH := int64(o.QHeads), int64(o.KVHeads)
	b.signature("input_ids", o.Layers, KVH, hd, V, Float)
	var werr error
	weight := func(name string, n int) []float32 {
		w, err := o.Weight(name)
		if err == nil && len(w) != n {
			err = fmt.Errorf("onnxtest: %s has %d values, want %d", name, len(w), n)
		}
		if err != nil && werr == nil {
			werr = err
		}
		if len(w) != n {
			w = make([]float32, n)
		}
		return w
	}
	// matrix makes the initializer x·Wᵀ needs: W [out, in] transposed.
	matrix := func(name string, out, in int64) string {
		w := weight(name, int(out*in))
		t := make([]float32, len(w))
		for r := range out {
			for c := range in {
				t[c*out+r] = w[r*in+c]
			}
		}
		return b.init(&Tensor{Name: name, Type: Float, Dims: []int64{in, out}, Float: t})
	}
	// gamma is an RMSNorm's scale 1 + w.
	gamma := func(name string, n int64) string {
		w := weight(name, int(n))
		t := make([]float32, n)
		for i, v := range w {
			t[i] = 1 + v
		}
		return b.init(&Tensor{Name: name, Type: Float, Dims: []int64{n}, Float: t})
	}
	eps, oneF := b.scalarF(o.RMSEps), b.scalarF(1)
	rms := func(x, gam string) string {
		ms := b.op("ReduceMean", []string{b.op("Mul", []string{x, x})}, AttrInts("axes", -1), AttrInt("keepdims", 1))
		r := b.op("Div", []string{oneF, b.op("Sqrt", []string{b.op("Add", []string{ms, eps})})})
		return b.op("Mul", []string{b.op("Mul", []string{x, r}), gam})
	}

	// Masks [batch, 1, 1, seq, total] (additive): query i sits at cache
	// index past+i and sees key j when j ≤ past+i and attention_mask[j];
	// on a sliding layer also when j > past+i − window.
	qpos, kpos, causal := b.cachePositions("input_ids")
	pad := b.op("Unsqueeze", []string{b.op("Cast", []string{"attention_mask"}, AttrInt("to", int64(Bool))), b.i64(1, 2, 3)})
	bias := func(allowed string) string {
		return b.op("Where", []string{b.op("And", []string{allowed, pad}), b.scalarF(0), b.scalarF(float32(math.Inf(-1)))})
	}
	fullBias := bias(causal)
	inWindow := b.op("Greater", []string{kpos, b.op("Sub", []string{qpos, b.scalarI64(int64(o.Window))})})
	slideBias := bias(b.op("And", []string{causal, inWindow}))

	// NeoX RoPE as transformers computes it: angles pos·inv_freq in float32,
	// emb = [angles, angles], x·cos + rotate_half(x)·sin, rotate_half(x) =
	// [−x₂, x₁]; per base, cos and sin [batch, 1, seq, hd].
	posF := b.op("Unsqueeze", []string{b.op("Cast", []string{"position_ids"}, AttrInt("to", int64(Float))), b.i64(2)})
	cosSin := func(base, factor float64) (string, string) {
		inv := make([]float32, hd/2)
		for i := range inv {
			// 1/(base^(2i/d)) with the exponent and power in float32.
			e := float32(2*i) / float32(hd)
			inv[i] = 1 / float32(math.Pow(float64(float32(base)), float64(e)))
			if factor > 1 {
				inv[i] /= float32(factor)
			}
		}
		ang := b.op("Mul", []string{posF, b.init(&Tensor{Name: b.name("inv_freq"), Type: Float, Dims: []int64{hd / 2}, Float: inv})})
		emb := b.op("Concat", []string{ang, ang}, AttrInt("axis", -1))
		ax1 := b.i64(1)
		return b.op("Unsqueeze", []string{b.op("Cos", []string{emb}), ax1}), b.op("Unsqueeze", []string{b.op("Sin", []string{emb}), ax1})
	}
	gCos, gSin := cosSin(o.RopeTheta, o.RopeFactor)
	lCos, lSin := cosSin(o.RopeLocalTheta, 1)
	hStart, hMid, hEnd, ax3 := b.i64(0), b.i64(hd/2), b.i64(hd), b.i64(3)
	rope := func(x, cos, sin string) string {
		lo := b.op("Slice", []string{x, hStart, hMid, ax3})
		hi := b.op("Slice", []string{x, hMid, hEnd, ax3})
		rot := b.op("Concat", []string{b.op("Neg", []string{hi}), lo}, AttrInt("axis", 3))
		return b.op("Add", []string{b.op("Mul", []string{x, cos}), b.op("Mul", []string{rot, sin})})
	}
	heads := func(x string, n int64) string { // [b, s, n·hd] → [b, n, s, hd]
		r := b.op("Reshape", []string{x, b.i64(0, 0, n, hd)})
		return b.op("Transpose", []string{r}, AttrInts("perm", 0, 2, 1, 3))
	}
	scale := b.scalarF(float32(math.Pow(o.QueryPreAttnScalar, -0.5)))
	group, merge := b.i64(0, KVH, QH/KVH, -1, hd), b.i64(0, 0, QH*hd)
	unHeads := b.i64(0, QH, -1, hd)
	half, c0, cA := b.scalarF(0.5), b.scalarF(float32(math.Sqrt(2/math.Pi))), b.scalarF(0.044715)
	gelu := func(x string) string {
		x3 := b.op("Mul", []string{b.op("Mul", []string{x, x}), x})
		in := b.op("Mul", []string{c0, b.op("Add", []string{x, b.op("Mul", []string{cA, x3})})})
		return b.op("Mul", []string{b.op("Mul", []string{half, x}), b.op("Add", []string{oneF, b.op("Tanh", []string{in})})})
	}

	embed := weight("model.embed_tokens.weight", int(V*D))
	b.init(&Tensor{Name: "embed_tokens", Type: Float, Dims: []int64{V, D}, Float: embed})
	x := b.op("Gather", []string{"embed_tokens", "input_ids"}, AttrInt("axis", 0))
	x = b.op("Mul", []string{x, b.scalarF(float32(math.Sqrt(float64(o.Hidden))))})
	for l := 0; l < o.Layers; l++ {
		p := fmt.Sprintf("model.layers.%d.", l)
		sliding := o.Pattern == 0 || o.Pattern > 1 && l%o.Pattern < o.Pattern-1
		cos, sin, mask := gCos, gSin, fullBias
		if sliding {
			cos, sin, mask = lCos, lSin, slideBias
		}
		h := rms(x, gamma(p+"input_layernorm.weight", D))
		q := heads(b.op("MatMul", []string{h, matrix(p+"self_attn.q_proj.weight", QH*hd, D)}), QH)
		k := heads(b.op("MatMul", []string{h, matrix(p+"self_attn.k_proj.weight", KVH*hd, D)}), KVH)
		v := heads(b.op("MatMul", []string{h, matrix(p+"self_attn.v_proj.weight", KVH*hd, D)}), KVH)
		q = rope(rms(q, gamma(p+"self_attn.q_norm.weight", hd)), cos, sin)
		k = rope(rms(k, gamma(p+"self_attn.k_norm.weight", hd)), cos, sin)
		kAll := b.opTo(fmt.Sprintf("present.%d.key", l), "Concat", []string{fmt.Sprintf("past_key_values.%d.key", l), k}, AttrInt("axis", 2))
		vAll := b.opTo(fmt.Sprintf("present.%d.value", l), "Concat", []string{fmt.Sprintf("past_key_values.%d.value", l), v}, AttrInt("axis", 2))
		// Query heads grouped by KV head: [b, KVH, QH/KVH, s, hd] against
		// K and V [b, KVH, 1, t, hd].
		qg := b.op("Reshape", []string{q, group})
		kg := b.op("Unsqueeze", []string{kAll, b.i64(2)})
		vg := b.op("Unsqueeze", []string{vAll, b.i64(2)})
		kT := b.op("Transpose", []string{kg}, AttrInts("perm", 0, 1, 2, 4, 3))
		scores := b.op("Add", []string{b.op("Mul", []string{b.op("MatMul", []string{qg, kT}), scale}), mask})
		probs := b.op("Softmax", []string{scores}, AttrInt("axis", -1))
		att := b.op("Reshape", []string{b.op("MatMul", []string{probs, vg}), unHeads})
		att = b.op("Reshape", []string{b.op("Transpose", []string{att}, AttrInts("perm", 0, 2, 1, 3)), merge})
		out := b.op("MatMul", []string{att, matrix(p+"self_attn.o_proj.weight", D, QH*hd)})
		x = b.op("Add", []string{x, rms(out, gamma(p+"post_attention_layernorm.weight", D))})
		h = rms(x, gamma(p+"pre_feedforward_layernorm.weight", D))
		ff := int64(o.FF)
		gate := b.op("MatMul", []string{h, matrix(p+"mlp.gate_proj.weight", ff, D)})
		up := b.op("MatMul", []string{h, matrix(p+"mlp.up_proj.weight", ff, D)})
		f := b.op("MatMul", []string{b.op("Mul", []string{gelu(gate), up}), matrix(p+"mlp.down_proj.weight", D, ff)})
		x = b.op("Add", []string{x, rms(f, gamma(p+"post_feedforward_layernorm.weight", D))})
	}
	// The LM head is the embedding: logits = norm(x)·Eᵀ.
	et := make([]float32, len(embed))
	for r := range V {
		for c := range D {
			et[c*V+r] = embed[r*D+c]
		}
	}
	head := b.init(&Tensor{Name: "lm_head", Type: Float, Dims: []int64{D, V}, Float: et})
	b.opTo("logits", "MatMul", []string{rms(x, gamma("model.norm.weight", D)), head})
	if werr != nil {
		return nil, werr
	}
	return &Model{Opset: 17, Graph: *b.g}, nil
}
