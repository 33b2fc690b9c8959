// Package model turns a model file into what the layers need: a Config of
// hyper-parameters and a Source of named weight tensors. GGUF files
// (model/gguf) and Hugging Face directories (config.json + safetensors,
// model/safetensors) both end up here, with every tensor under its GGUF name.
// One table (weights.go) declares every architecture's tensors: what a file
// holds, their Hugging Face names, and what package layers reads.
package model

import "github.com/glint-llm/glint/dtype"

// Config holds a model's hyper-parameters. The zero values of the fields
// after TiedEmbeddings are Llama's; the other architectures set what they
// change (see Archs).
type Config struct {
	Arch    string // general.architecture: one of Archs
	NLayer  int
	NEmbd   int
	NHead   int
	NHeadKV int
	HeadDim int
	NFF     int
	Vocab   int
	Context int // trained context length

	// RMSEps is the norms' epsilon: RMSNorm's, or LayerNorm's where
	// LayerNorm is set (GPT-2's layer_norm_epsilon).
	RMSEps    float32
	RopeTheta float32 // default 10000
	RopeDims  int     // rotated dims per head (default HeadDim)
	// RopeNeoX: rotate (i, i+d/2) pairs. Hugging Face checkpoints need it;
	// GGUF llama files have Q/K rows permuted for adjacent pairs.
	RopeNeoX bool
	// HasRopeFreqs: the source has rope_freqs.weight (Llama 3 scaling).
	HasRopeFreqs bool
	// TiedEmbeddings: no output.weight; the LM head is token_embd.weight.
	TiedEmbeddings bool

	// AttnBias: Q, K and V have biases (Qwen 2, GPT-2).
	AttnBias bool
	// OutBias: the attention output and the FFN's projections have biases
	// too (GPT-2).
	OutBias bool
	// QKNorm: q and k are RMS-normalised per head before RoPE (Qwen 3,
	// Gemma 3: attn_q_norm, attn_k_norm).
	QKNorm bool
	// PostNorms: the attention and FFN outputs are RMS-normalised before
	// they join the residual stream (Gemma 2 and 3).
	PostNorms bool
	// LayerNorm: the norms are LayerNorm with a bias (GPT-2), not RMSNorm.
	LayerNorm bool
	// GELU: the FFN activation is GELU (tanh form), not SiLU.
	GELU bool
	// NoGate: the FFN is down(act(up(x))) with no gate (GPT-2).
	NoGate bool
	// NoRoPE: positions come from a learned table added to the token
	// embeddings (position_embd.weight; GPT-2), not from rotations.
	NoRoPE bool
	// FusedQKV and FusedGateUp: the file stores Q, K and V as one matrix
	// (attn_qkv) and the FFN's gate and up as one (ffn_up, gate first),
	// as Phi-3 (both) and GPT-2 (attn_qkv) do; Unfused splits them by rows.
	FusedQKV, FusedGateUp bool

	// EmbedScale, when > 0, multiplies the token embeddings (Gemma: √embd).
	EmbedScale float32
	// QueryScale, when > 0, multiplies q before attention, which then
	// scales its scores by 1 (Phi-3, Gemma: llama.cpp's graph scales q so,
	// before an f16 cache rounds the products). Otherwise attention scales
	// by 1/√HeadDim.
	QueryScale float32
	// AttnSoftCap and FinalSoftCap, when > 0, soft-cap the attention
	// scores and the logits: c·tanh(x/c) (Gemma 2).
	AttnSoftCap, FinalSoftCap float32
	// SlidingWindow, when > 0, is the window of the sliding-window layers:
	// a token attends to the SlidingWindow latest positions, itself
	// included. SWAPattern says which layers slide, as llama.cpp's
	// n_swa_pattern: 0 every layer (Phi-3), 1 none, p > 1 layer il when
	// il mod p < p−1 (Gemma 2: 2, Gemma 3: 6).
	SlidingWindow, SWAPattern int
	// RopeThetaSWA, when > 0, is the RoPE base of the sliding-window layers
	// (Gemma 3: 10000; its global layers take RopeTheta).
	RopeThetaSWA float32
	// HasRopeFactors: the source has Phi-3's LongRoPE frequency divisors
	// rope_factors_short.weight and rope_factors_long.weight; the long ones
	// apply when the context exceeds RopeOrigContext.
	HasRopeFactors  bool
	RopeOrigContext int
	// RopeFreqScale, when > 0 and not 1, multiplies the RoPE angles: linear
	// scaling, 1/factor (rope.scaling.factor). Gemma 3 applies it to its
	// global layers only.
	RopeFreqScale float32
	// RopeAttnFactor, when > 0 and not 1, scales RoPE's cos and sin
	// (LongRoPE's √(1 + ln(scale)/ln(original context)), as llama.cpp's
	// rope.scaling.attn_factor).
	RopeAttnFactor float32
}

// Archs are the architectures glint runs (general.architecture values).
var Archs = []string{"llama", "qwen2", "qwen3", "gemma2", "gemma3", "phi3", "gpt2"}

// Sliding reports whether layer il attends through the sliding window.
func (c Config) Sliding(il int) bool {
	if c.SlidingWindow <= 0 {
		return false
	}
	switch p := c.SWAPattern; {
	case p == 0:
		return true
	case p == 1:
		return false
	default:
		return il%p < p-1
	}
}

// LayerRopeFreqScale is the linear RoPE scaling of layer il (0: none):
// RopeFreqScale, but none on Gemma 3's sliding layers, as llama.cpp and
// transformers apply it.
func (c Config) LayerRopeFreqScale(il int) float32 {
	if c.Arch == "gemma3" && c.Sliding(il) {
		return 0
	}
	return c.RopeFreqScale
}

// LayerRopeTheta is the RoPE base of layer il.
func (c Config) LayerRopeTheta(il int) float32 {
	if c.RopeThetaSWA > 0 && c.Sliding(il) {
		return c.RopeThetaSWA
	}
	return c.RopeTheta
}

// TensorData is one stored tensor: its type, row-major shape (outermost
// first: a weight matrix is [out, in]) and raw bytes in dtype's layout.
type TensorData struct {
	Name  string
	Type  dtype.Type
	Shape []int
	Data  []byte
}

// Source gives access to a model's tensors by GGUF name
// ("token_embd.weight", "blk.0.attn_q.weight", …).
type Source interface {
	Tensor(name string) (TensorData, error)
	Has(name string) bool
}

// PageReleaser is implemented by sources whose tensor data is a read-only
// file mapping. After a backend has copied a tensor (uploaded it, or
// repacked it), ReleasePages drops its pages from resident memory, so a
// model costs its size once; the data stays valid and is re-read from the
// file if touched.
type PageReleaser interface {
	ReleasePages(name string)
}
