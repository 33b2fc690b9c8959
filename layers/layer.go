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

// Forward runs layer il over the n tokens of the batch the cache has begun
// (kvcache.Cache.Begin), at the positions in ws.Pos, updating the residual
// stream ws.X in place.
func (l *Layer) Forward(s *State, il, n int) {
	b, c, ws := s.B, &s.C, s.WS
	// 1. x̂ = RMSNorm(x)·g_attn
	b.RMSNorm(ws.XNorm, ws.X, l.AttnNorm, n, c.RMSEps)
	// 2. q, k, v = x̂·Wqᵀ, x̂·Wkᵀ, x̂·Wvᵀ
	b.MatMulTransposed(ws.Q, ws.XNorm, l.Wq, n)
	b.MatMulTransposed(ws.K, ws.XNorm, l.Wk, n)
	b.MatMulTransposed(ws.V, ws.XNorm, l.Wv, n)
	// 3. rotate q and k by their positions
	b.RoPE(ws.Q, n, c.NHead, c.HeadDim, ws.Pos, s.Rope)
	b.RoPE(ws.K, n, c.NHeadKV, c.HeadDim, ws.Pos, s.Rope)
	// 4. append k, v to the cache
	s.KV.Store(b, il, ws.K, ws.V, n)
	// 5. a = softmax(q·Kᵀ/√d + mask)·V over the cells each token sees
	kc, vc := s.KV.Layer(il)
	attn := backend.Attn{Heads: c.NHead, KVHeads: c.NHeadKV, HeadDim: c.HeadDim,
		Scale: float32(1 / math.Sqrt(float64(c.HeadDim)))}
	b.Attention(ws.Att, ws.Q, kc, vc, n, s.KV.View(), attn)
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
