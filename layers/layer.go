// Package layers is the Llama model written against backend ops: a decoder
// Layer whose fields are its weights, and the Model that stacks the layers
// between the token embedding and the LM head. It reads like the math; which
// backend runs it is not its concern.
package layers

import (
	"math"

	"github.com/glint-llm/glint/backend"
	"github.com/glint-llm/glint/kvcache"
	"github.com/glint-llm/glint/model"
	"github.com/glint-llm/glint/workspace"
)

// Layer is one Llama decoder block.
type Layer struct {
	AttnNorm backend.Tensor // [embd]
	Wq       backend.Tensor // [heads·headDim, embd]
	Wk       backend.Tensor // [kvHeads·headDim, embd]
	Wv       backend.Tensor // [kvHeads·headDim, embd]
	Wo       backend.Tensor // [embd, heads·headDim]
	FFNNorm  backend.Tensor // [embd]
	WGate    backend.Tensor // [ff, embd]
	WUp      backend.Tensor // [ff, embd]
	WDown    backend.Tensor // [embd, ff]
}

// State is what every layer of a model shares: the backend, the
// hyper-parameters, the workspace and the cache.
type State struct {
	B    backend.Backend
	C    model.Config
	Rope backend.Rope
	WS   *workspace.LayerWorkspace
	KV   *kvcache.Cache
}

// Forward runs layer il over n prompt tokens at positions pos0 … pos0+n-1,
// updating the residual stream ws.X in place (causal attention).
func (l *Layer) Forward(s *State, il, n, pos0 int) { l.forward(s, il, n, pos0) }

// ForwardGen runs layer il for one generated token at position pos
// (attention of one query over the cache).
func (l *Layer) ForwardGen(s *State, il, pos int) { l.forward(s, il, 1, pos) }

// forward is the Llama decoder block, step by step.
func (l *Layer) forward(s *State, il, n, pos0 int) {
	b, c, ws := s.B, &s.C, s.WS
	// 1. x̂ = RMSNorm(x)·g_attn
	b.RMSNorm(ws.XNorm, ws.X, l.AttnNorm, n, c.RMSEps)
	// 2. q, k, v = x̂·Wqᵀ, x̂·Wkᵀ, x̂·Wvᵀ
	b.MatMulTransposed(ws.Q, ws.XNorm, l.Wq, n)
	b.MatMulTransposed(ws.K, ws.XNorm, l.Wk, n)
	b.MatMulTransposed(ws.V, ws.XNorm, l.Wv, n)
	// 3. rotate q and k by their positions
	b.RoPE(ws.Q, n, c.NHead, c.HeadDim, pos0, s.Rope)
	b.RoPE(ws.K, n, c.NHeadKV, c.HeadDim, pos0, s.Rope)
	// 4. append k, v to the cache
	s.KV.Store(b, il, ws.K, ws.V, n)
	// 5. a = softmax(q·Kᵀ/√d + causal mask)·V
	kc, vc := s.KV.Layer(il)
	scale := float32(1 / math.Sqrt(float64(c.HeadDim)))
	if n == 1 {
		b.AttentionGen(ws.Att, ws.Q, kc, vc, pos0+1, c.NHead, c.NHeadKV, c.HeadDim, scale)
	} else {
		b.Attention(ws.Att, ws.Q, kc, vc, n, pos0, c.NHead, c.NHeadKV, c.HeadDim, scale)
	}
	// 6. o = a·Woᵀ; 7. x = x + o
	b.MatMulTransposed(ws.Out, ws.Att, l.Wo, n)
	b.Add(ws.X, ws.X, ws.Out, n)
	// 8. x̂ = RMSNorm(x)·g_ffn
	b.RMSNorm(ws.XNorm, ws.X, l.FFNNorm, n, c.RMSEps)
	// 9. h = silu(x̂·W_gateᵀ) ⊙ (x̂·W_upᵀ); 10. f = h·W_downᵀ
	b.MatMulTransposed(ws.Gate, ws.XNorm, l.WGate, n)
	b.MatMulTransposed(ws.Up, ws.XNorm, l.WUp, n)
	b.SiLUMul(ws.Gate, ws.Gate, ws.Up, n)
	b.MatMulTransposed(ws.Out, ws.Gate, l.WDown, n)
	// 11. x = x + f
	b.Add(ws.X, ws.X, ws.Out, n)
}
