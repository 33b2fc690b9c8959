// Package load opens a model file for glint: a GGUF file or a Hugging Face
// folder (config.json plus safetensors), giving its model.Config and a
// model.Source with every tensor under its GGUF name. It lives apart from
// package model because the file-format packages import model for its
// Source and TensorData types.
package load

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"

	"github.com/glint-llm/glint/dtype"
	"github.com/glint-llm/glint/model"
	"github.com/glint-llm/glint/model/gguf"
	"github.com/glint-llm/glint/model/safetensors"
)

// File is an opened model.
type File struct {
	Config model.Config
	Source model.Source // tensors by GGUF name
	GGUF   *gguf.File   // the GGUF file, nil for a Hugging Face folder
	Dir    string       // the Hugging Face folder, "" for GGUF
	Path   string       // as given to Open

	closer func() error
}

// Close releases the mapped files; tensor data must not be used afterwards.
func (f *File) Close() error {
	if f.closer == nil {
		return nil
	}
	err := f.closer()
	f.closer = nil
	return err
}

// Open opens a GGUF file, or a Hugging Face folder holding config.json and
// model.safetensors (or shards listed in model.safetensors.index.json). The
// tensors are checked against the config before Open returns.
func Open(path string) (*File, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	if st.IsDir() {
		return openHF(path)
	}
	g, err := gguf.Open(path)
	if err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	c, err := ConfigFromGGUF(g)
	if err != nil {
		g.Close()
		return nil, err
	}
	return &File{Config: c, Source: g, GGUF: g, Path: path, closer: g.Close}, nil
}

// The llama.* metadata keys glint reads (llama.cpp's LLM_KV names).
const (
	keyBlockCount = "block_count"
	keyEmbd       = "embedding_length"
	keyFF         = "feed_forward_length"
	keyHeads      = "attention.head_count"
	keyHeadsKV    = "attention.head_count_kv"
	keyKeyLen     = "attention.key_length"
	keyValueLen   = "attention.value_length"
	keyRMSEps     = "attention.layer_norm_rms_epsilon"
	keyRopeBase   = "rope.freq_base"
	keyRopeDims   = "rope.dimension_count"
	keyContext    = "context_length"
	keyVocab      = "vocab_size"
)

// ConfigFromGGUF reads a llama GGUF file's hyper-parameters, applying
// llama.cpp's defaults, and checks them against the file's tensors.
func ConfigFromGGUF(f *gguf.File) (model.Config, error) {
	where := f.Path
	if where == "" {
		where = "(memory)"
	}
	fail := func(err error) (model.Config, error) {
		return model.Config{}, fmt.Errorf("model: %s: %w", where, err)
	}
	arch, err := f.String("general.architecture")
	if err != nil {
		return fail(err)
	}
	if arch != "llama" {
		return fail(fmt.Errorf("architecture %q is not supported (only llama)", arch))
	}
	r := kvReader{f: f, prefix: arch + "."}
	c := model.Config{Arch: arch}
	c.NLayer = r.int(keyBlockCount)
	c.NEmbd = r.int(keyEmbd)
	c.NHead = r.int(keyHeads)
	c.NFF = r.int(keyFF)
	c.Context = r.int(keyContext)
	c.RMSEps = float32(r.float(keyRMSEps))
	c.NHeadKV = r.intOr(keyHeadsKV, c.NHead)
	c.RopeTheta = float32(r.floatOr(keyRopeBase, 10000))
	switch {
	case r.has(keyKeyLen):
		c.HeadDim = r.int(keyKeyLen)
	case r.has(keyRopeDims):
		c.HeadDim = r.int(keyRopeDims)
	case c.NHead > 0 && c.NEmbd%c.NHead == 0:
		c.HeadDim = c.NEmbd / c.NHead
	default:
		r.errs = append(r.errs, fmt.Errorf("embedding length %d is not a multiple of %d heads and %s%s is absent", c.NEmbd, c.NHead, r.prefix, keyKeyLen))
	}
	if v := r.intOr(keyValueLen, c.HeadDim); v != c.HeadDim {
		r.errs = append(r.errs, fmt.Errorf("value length %d differs from key length %d, which glint does not support", v, c.HeadDim))
	}
	c.RopeDims = r.intOr(keyRopeDims, c.HeadDim)
	switch {
	case r.has(keyVocab):
		c.Vocab = r.int(keyVocab)
	default:
		if v, ok := f.Get("tokenizer.ggml.tokens"); ok && v.Len() > 0 {
			c.Vocab = v.Len()
		} else if ti, ok := f.Info("token_embd.weight"); ok && len(ti.Dims) == 2 {
			c.Vocab = int(ti.Dims[1])
		}
	}
	c.HasRopeFreqs = f.Has("rope_freqs.weight")
	c.TiedEmbeddings = !f.Has("output.weight")
	if err := errors.Join(r.errs...); err != nil {
		return fail(err)
	}
	if err := c.Validate(); err != nil {
		return fail(err)
	}
	if err := c.CheckSource(f); err != nil {
		return fail(err)
	}
	return c, nil
}

// kvReader collects the errors of reading several keys, so that a file
// missing three keys says so once.
type kvReader struct {
	f      *gguf.File
	prefix string
	errs   []error
}

func (r *kvReader) has(key string) bool {
	_, ok := r.f.Get(r.prefix + key)
	return ok
}

func (r *kvReader) int(key string) int {
	v, err := r.f.Uint(r.prefix + key)
	if err == nil && v > math.MaxInt32 {
		err = fmt.Errorf("%s%s = %d is out of range", r.prefix, key, v)
	}
	if err != nil {
		r.errs = append(r.errs, err)
		return 0
	}
	return int(v)
}

func (r *kvReader) intOr(key string, def int) int {
	if !r.has(key) {
		return def
	}
	return r.int(key)
}

func (r *kvReader) float(key string) float64 {
	v, err := r.f.Float(r.prefix + key)
	if err != nil {
		r.errs = append(r.errs, err)
	}
	return v
}

func (r *kvReader) floatOr(key string, def float64) float64 {
	if !r.has(key) {
		return def
	}
	return r.float(key)
}

// openHF opens a Hugging Face folder.
func openHF(dir string) (*File, error) {
	cj, err := os.ReadFile(filepath.Join(dir, "config.json"))
	if err != nil {
		return nil, fmt.Errorf("model: %s: not a GGUF file or Hugging Face folder: %w", dir, err)
	}
	h, err := model.ParseHFConfig(cj)
	if err != nil {
		return nil, fmt.Errorf("model: %s: %w", dir, err)
	}
	c, err := h.Config()
	if err != nil {
		return nil, fmt.Errorf("model: %s: %w", dir, err)
	}
	set, err := safetensors.OpenDir(dir)
	if err != nil {
		return nil, fmt.Errorf("model: %s: %w", dir, err)
	}
	if !set.Has("lm_head.weight") {
		c.TiedEmbeddings = true
	}
	src := &hfSource{set: set, tied: c.TiedEmbeddings}
	if s, ok, _ := h.Llama3Scaling(); ok {
		freqs := model.Llama3RopeFreqs(c.RopeDims, float64(c.RopeTheta), s)
		b := make([]byte, 4*len(freqs))
		for i, v := range freqs {
			binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
		}
		src.ropeFreqs = &model.TensorData{Name: "rope_freqs.weight", Type: dtype.F32, Shape: []int{len(freqs)}, Data: b}
	}
	if err := c.CheckSource(src); err != nil {
		set.Close()
		return nil, fmt.Errorf("model: %s: %w", dir, err)
	}
	return &File{Config: c, Source: src, Dir: dir, Path: dir, closer: set.Close}, nil
}

// hfSource serves a Hugging Face checkpoint's tensors under GGUF names,
// unpermuted (the config says RopeNeoX), plus the rope_freqs.weight that
// convert_hf_to_gguf.py would have written.
type hfSource struct {
	set       *safetensors.Set
	ropeFreqs *model.TensorData
	tied      bool
}

func (s *hfSource) Has(name string) bool {
	if name == "rope_freqs.weight" {
		return s.ropeFreqs != nil
	}
	if name == "output.weight" && s.tied {
		return false
	}
	hf, ok := model.HFName(name)
	return ok && s.set.Has(hf)
}

func (s *hfSource) Tensor(name string) (model.TensorData, error) {
	if name == "rope_freqs.weight" && s.ropeFreqs != nil {
		td := *s.ropeFreqs
		td.Shape = slices.Clone(td.Shape)
		return td, nil
	}
	if !s.Has(name) {
		return model.TensorData{}, fmt.Errorf("model: no tensor %q in the Hugging Face checkpoint", name)
	}
	hf, _ := model.HFName(name)
	td, err := s.set.Tensor(hf)
	if err != nil {
		return model.TensorData{}, err
	}
	td.Name = name
	// Norm weights (every 1-D tensor) are F32, as convert_hf_to_gguf.py
	// writes them and as the backends' RMSNorm takes them; half-precision
	// checkpoints store them in F16 or BF16. Widening is exact.
	if len(td.Shape) == 1 && (td.Type == dtype.F16 || td.Type == dtype.BF16) {
		f := make([]float32, td.Shape[0])
		dtype.DequantizeRow(td.Type, f, td.Data)
		b := make([]byte, 4*len(f))
		for i, v := range f {
			binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
		}
		td.Type, td.Data = dtype.F32, b
	}
	return td, nil
}

// ReleasePages releases a tensor's pages of its safetensors shard.
func (s *hfSource) ReleasePages(name string) {
	if hf, ok := model.HFName(name); ok {
		s.set.ReleasePages(hf)
	}
}

var _ model.PageReleaser = (*hfSource)(nil)
