// Package layers is the decoder written against backend ops: a Layer whose
// fields are its weights, and the Model that stacks the layers between the
// token embedding and the LM head. The block is Llama's; the other
// architectures (Qwen 2/3, Gemma 2/3, Phi-3, GPT-2) add named steps to it
// where their weights or config say so. It reads like the math; which
// backend runs it is not its concern.
package layers

import (
	"math"

	"github.com/glint-llm/glint/backend"
	"github.com/glint-llm/glint/kvcache"
	"github.com/glint-llm/glint/model"
	"github.com/glint-llm/glint/workspace"
)

// Layer is one decoder block. Each field's tag is the GGUF name (after
// "blk.N.") of the weight it holds, which binds it to model.Config.Weights;
// the weights after each group's first are nil where the architecture has
// none.
type Layer struct {
	AttnNorm backend.Tensor `gguf:"attn_norm.weight"`   // [embd]
	Wq       backend.Tensor `gguf:"attn_q.weight"`      // [heads·headDim, embd]
	Wk       backend.Tensor `gguf:"attn_k.weight"`      // [kvHeads·headDim, embd]
	Wv       backend.Tensor `gguf:"attn_v.weight"`      // [kvHeads·headDim, embd]
	Wo       backend.Tensor `gguf:"attn_output.weight"` // [embd, heads·headDim]
	FFNNorm  backend.Tensor `gguf:"ffn_norm.weight"`    // [embd]
	WGate    backend.Tensor `gguf:"ffn_gate.weight"`    // [ff, embd]; nil: an ungated FFN (GPT-2)
	WUp      backend.Tensor `gguf:"ffn_up.weight"`      // [ff, embd]
	WDown    backend.Tensor `gguf:"ffn_down.weight"`    // [embd, ff]

	// LayerNorm biases (GPT-2): [embd].
	AttnNormB backend.Tensor `gguf:"attn_norm.bias"`
	FFNNormB  backend.Tensor `gguf:"ffn_norm.bias"`
	// Projection biases: Q, K, V (Qwen 2, GPT-2); the output and FFN
	// projections (GPT-2).
	Bq    backend.Tensor `gguf:"attn_q.bias"`
	Bk    backend.Tensor `gguf:"attn_k.bias"`
	Bv    backend.Tensor `gguf:"attn_v.bias"`
	Bo    backend.Tensor `gguf:"attn_output.bias"`
	BUp   backend.Tensor `gguf:"ffn_up.bias"`
	BDown backend.Tensor `gguf:"ffn_down.bias"`
	// Per-head RMSNorm weights of q and k (Qwen 3, Gemma 3): [headDim].
	QNorm backend.Tensor `gguf:"attn_q_norm.weight"`
	KNorm backend.Tensor `gguf:"attn_k_norm.weight"`
	// RMSNorm weights of the attention and FFN outputs (Gemma): [embd].
	AttnPostNorm backend.Tensor `gguf:"post_attention_norm.weight"`
	FFNPostNorm  backend.Tensor `gguf:"post_ffw_norm.weight"`
}

// State is what every layer of a model shares: the backend, the
// hyper-parameters, each layer's RoPE, the workspace and the cache.
type State struct {
	B     backend.Backend
	C     model.Config
	Ropes []backend.Rope // per layer (Gemma 3's sliding layers have their own base)
	WS    *workspace.LayerWorkspace
	KV    *kvcache.Cache
	// Decode gives every row of the batch a decode step's arithmetic
	// (Model.Verify): the matmuls by MatMulDecode, attention through a view
	// with KVView.Decode.
	Decode bool
	// Flash: attention runs as flash attention (backend.Attn.Flash).
	Flash bool
}

// Forward runs layer il over the n tokens of the batch the cache has begun
// (kvcache.Cache.Begin), at the positions in ws.Pos, updating the residual
// stream ws.X in place: the decoder block, step by step.
func (l *Layer) Forward(s *State, il, n int) {
	l.attention(s, il, n)
	l.feedForward(s, n)
}

// attention is the block's steps 1–6: the attention of the n tokens,
// appending their keys and values to layer il's cache, into ws.Out.
func (l *Layer) attention(s *State, il, n int) {
	b, c, ws := s.B, &s.C, s.WS
	// 1. x̂ = RMSNorm(x)·g_attn
	s.norm(ws.XNorm, ws.X, l.AttnNorm, l.AttnNormB, n)
	// 2. q, k, v = x̂·Wqᵀ, x̂·Wkᵀ, x̂·Wvᵀ (+ biases)
	s.linear(ws.Q, ws.XNorm, l.Wq, l.Bq, n)
	s.linear(ws.K, ws.XNorm, l.Wk, l.Bk, n)
	s.linear(ws.V, ws.XNorm, l.Wv, l.Bv, n)
	// 2a. Qwen 3, Gemma 3: RMS-normalise each head of q and k
	if l.QNorm != nil {
		b.RMSNorm(ws.Q, ws.Q, l.QNorm, n, c.RMSEps)
		b.RMSNorm(ws.K, ws.K, l.KNorm, n, c.RMSEps)
	}
	// 3. rotate q and k by their positions (GPT-2 added them to x instead)
	if !c.NoRoPE {
		b.RoPE(ws.Q, n, c.NHead, c.HeadDim, ws.Pos, s.Ropes[il])
		b.RoPE(ws.K, n, c.NHeadKV, c.HeadDim, ws.Pos, s.Ropes[il])
	}
	// 3a. Phi-3, Gemma: scale q here, not the scores
	if c.QueryScale > 0 {
		b.Scale(ws.Q, ws.Q, n, c.QueryScale)
	}
	// 4. append k, v to the cache
	s.KV.Store(b, il, ws.K, ws.V, n)
	// 5. a = softmax(q·Kᵀ/√d + mask)·V over the cells each token sees
	s.attend(il, n)
	// 6. o = a·Woᵀ (+ b_o)
	s.linear(ws.Out, ws.Att, l.Wo, l.Bo, n)
	// 6a. Gemma: normalise the attention's output
	if l.AttnPostNorm != nil {
		b.RMSNorm(ws.Out, ws.Out, l.AttnPostNorm, n, c.RMSEps)
	}
}

// feedForward is the block's steps 7–11 over the first n rows of the
// residual stream ws.X and the attention's output ws.Out; each row is its
// own (no step mixes rows).
func (l *Layer) feedForward(s *State, n int) {
	b, c, ws := s.B, &s.C, s.WS
	// 7. x = x + o
	b.Add(ws.X, ws.X, ws.Out, n)
	// 8. x̂ = RMSNorm(x)·g_ffn
	s.norm(ws.XNorm, ws.X, l.FFNNorm, l.FFNNormB, n)
	// 9. h = silu(x̂·W_gateᵀ) ⊙ (x̂·W_upᵀ); 10. f = h·W_downᵀ
	l.ffn(s, n)
	// 10a. Gemma: normalise the FFN's output
	if l.FFNPostNorm != nil {
		b.RMSNorm(ws.Out, ws.Out, l.FFNPostNorm, n, c.RMSEps)
	}
	// 11. x = x + f
	b.Add(ws.X, ws.X, ws.Out, n)
}

// ffn computes the feed-forward network of x̂ (ws.XNorm) into ws.Out:
// SwiGLU (Llama), GeGLU (Gemma) or, with no gate, GPT-2's
// gelu(x̂·W_upᵀ + b_up)·W_downᵀ + b_down.
func (l *Layer) ffn(s *State, n int) {
	b, ws := s.B, s.WS
	if l.WGate == nil {
		s.linear(ws.Up, ws.XNorm, l.WUp, l.BUp, n)
		b.GELU(ws.Up, ws.Up, n)
		s.linear(ws.Out, ws.Up, l.WDown, l.BDown, n)
		return
	}
	s.matMul(ws.Gate, ws.XNorm, l.WGate, n)
	s.matMul(ws.Up, ws.XNorm, l.WUp, n)
	if s.C.GELU {
		b.GELUMul(ws.Gate, ws.Gate, ws.Up, n)
	} else {
		b.SiLUMul(ws.Gate, ws.Gate, ws.Up, n)
	}
	s.matMul(ws.Out, ws.Gate, l.WDown, n)
}

// norm is the architecture's norm: RMSNorm(x)·w, or LayerNorm(x)·w + bias
// (GPT-2).
func (s *State) norm(dst, x, w, bias backend.Tensor, n int) {
	if s.C.LayerNorm {
		s.B.LayerNorm(dst, x, w, bias, n, s.C.RMSEps)
		return
	}
	s.B.RMSNorm(dst, x, w, n, s.C.RMSEps)
}

// linear is dst = x·wᵀ, plus bias when there is one.
func (s *State) linear(dst, x, w, bias backend.Tensor, n int) {
	s.matMul(dst, x, w, n)
	if bias != nil {
		s.B.AddBias(dst, dst, bias, n)
	}
}

// attend is attention of the n queries in ws.Q over the cells of layer
// il's cache each sees (the cache's view: causal, and within the window on
// a sliding layer), into ws.Att. Scores are scaled by 1/√headDim unless q
// was scaled already (QueryScale), and soft-capped for Gemma 2.
func (s *State) attend(il, n int) {
	c := &s.C
	kc, vc := s.KV.Layer(il)
	a := backend.Attn{Heads: c.NHead, KVHeads: c.NHeadKV, HeadDim: c.HeadDim, Scale: invSqrt(c.HeadDim), SoftCap: c.AttnSoftCap, Flash: s.Flash}
	if c.QueryScale > 0 {
		a.Scale = 1
	}
	if c.Sliding(il) {
		a.Window = c.SlidingWindow
	}
	kv := s.KV.View()
	kv.Decode = s.Decode
	s.B.Attention(s.WS.Att, s.WS.Q, kc, vc, n, kv, a)
}

// invSqrt is 1/√d as llama.cpp computes it: 1.0f/sqrtf(d).
func invSqrt(d int) float32 { return 1 / float32(math.Sqrt(float64(d))) }

// matMul is dst = x·wᵀ, each row in a decode step's arithmetic when the
// batch is a verification (State.Decode).
func (s *State) matMul(dst, x, w backend.Tensor, n int) {
	if s.Decode {
		s.B.MatMulDecode(dst, x, w, n)
		return
	}
	s.B.MatMulTransposed(dst, x, w, n)
}
