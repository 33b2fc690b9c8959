// Package model turns a model file into what the layers need: a Config of
// hyper-parameters and a Source of named weight tensors. GGUF files
// (model/gguf) and Hugging Face directories (config.json + safetensors,
// model/safetensors) both end up here, with every tensor under its GGUF name
// so that package layers maps names to weights in one place.
package model

import "github.com/glint-llm/glint/dtype"

// Config holds a Llama-family model's hyper-parameters.
type Config struct {
	Arch    string // "llama"
	NLayer  int
	NEmbd   int
	NHead   int
	NHeadKV int
	HeadDim int
	NFF     int
	Vocab   int
	Context int // trained context length

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
