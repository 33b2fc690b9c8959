// Package load opens a model file for glint: a GGUF file or a Hugging Face
// folder (config.json plus safetensors), giving its model.Config and a
// model.Source with every tensor under its GGUF name. It lives apart from
// package model because the file-format packages import model for its
// Source and TensorData types.
package load

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

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

// The <arch>.* metadata keys glint reads (llama.cpp's LLM_KV names).
const (
	keyBlockCount   = "block_count"
	keyEmbd         = "embedding_length"
	keyFF           = "feed_forward_length"
	keyHeads        = "attention.head_count"
	keyHeadsKV      = "attention.head_count_kv"
	keyKeyLen       = "attention.key_length"
	keyValueLen     = "attention.value_length"
	keyRMSEps       = "attention.layer_norm_rms_epsilon"
	keyNormEps      = "attention.layer_norm_epsilon"
	keyRopeBase     = "rope.freq_base"
	keyRopeDims     = "rope.dimension_count"
	keyContext      = "context_length"
	keyVocab        = "vocab_size"
	keyWindow       = "attention.sliding_window"
	keyAttnSoftCap  = "attn_logit_softcapping"
	keyFinalSoftCap = "final_logit_softcapping"
	keyRopeOrigCtx  = "rope.scaling.original_context_length"
	keyRopeAttnFac  = "rope.scaling.attn_factor"
	keyRopeScaling  = "rope.scaling.type"
	keyRopeFactor   = "rope.scaling.factor"
)

// ConfigFromGGUF reads a GGUF file's hyper-parameters, applying llama.cpp's
// defaults for its architecture, and checks them against the file's
// tensors.
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
	if err := model.CheckArch(arch); err != nil {
		return fail(err)
	}
	r := kvReader{f: f, prefix: arch + "."}
	c := model.Config{Arch: arch}
	c.NLayer = r.int(keyBlockCount)
	c.NEmbd = r.int(keyEmbd)
	c.NHead = r.int(keyHeads)
	c.NFF = r.int(keyFF)
	c.Context = r.int(keyContext)
	if arch == "gpt2" {
		c.RMSEps = float32(r.float(keyNormEps))
	} else {
		c.RMSEps = float32(r.float(keyRMSEps))
	}
	c.NHeadKV = r.intOr(keyHeadsKV, c.NHead)
	c.RopeTheta = float32(r.floatOr(keyRopeBase, 10000))
	switch {
	case r.has(keyKeyLen):
		c.HeadDim = r.int(keyKeyLen)
	case arch == "llama" && r.has(keyRopeDims):
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
	// Linear scaling divides the angles by its factor (llama.cpp reads the
	// factor whatever the type says); YaRN is not implemented: refuse it
	// rather than run with the wrong positions. Phi-3's LongRoPE is its
	// factor tensors.
	scaling, _ := r.str(keyRopeScaling)
	factor := float32(r.floatOr(keyRopeFactor, 0))
	switch {
	case arch == "phi3" && scaling == "longrope":
	case scaling != "" && scaling != "none" && scaling != "linear":
		r.errs = append(r.errs, fmt.Errorf("rope scaling %q with factor %g is not supported", scaling, factor))
	case factor != 0 && factor != 1:
		c.RopeFreqScale = 1 / factor
	}
	switch arch {
	case "gemma2":
		// llama.cpp's defaults (llama_hparams, and Gemma 2's window).
		c.AttnSoftCap = float32(r.floatOr(keyAttnSoftCap, 50))
		c.FinalSoftCap = float32(r.floatOr(keyFinalSoftCap, 30))
		c.SlidingWindow = r.intOr(keyWindow, 4096)
	case "gemma3":
		c.SlidingWindow = r.int(keyWindow)
	case "phi3":
		// llama.cpp's defaults for files written before the key existed.
		switch {
		case (c.NLayer == 32 || c.NLayer == 40) && c.Context == 4096:
			c.SlidingWindow = 2047
		case c.NLayer == 32 && c.NHeadKV == 32 && c.Context == 131072:
			c.SlidingWindow = 262144
		case c.NLayer == 40 && c.Context == 131072:
			c.SlidingWindow = 131072
		}
		c.SlidingWindow = r.intOr(keyWindow, c.SlidingWindow)
		if c.SlidingWindow == 0 {
			r.errs = append(r.errs, fmt.Errorf("%s%s is missing", r.prefix, keyWindow))
		}
		c.HasRopeFactors = f.Has("rope_factors_long.weight") || f.Has("rope_factors_short.weight")
		c.RopeOrigContext = r.intOr(keyRopeOrigCtx, c.Context)
		c.RopeAttnFactor = float32(r.floatOr(keyRopeAttnFac, 1))
	}
	if err := errors.Join(r.errs...); err != nil {
		return fail(err)
	}
	if c, err = c.WithArch(); err != nil {
		return fail(err)
	}
	if err := c.Validate(); err != nil {
		return fail(err)
	}
	// Layers are counted against the tensors first, so that a claim of
	// millions is refused by name before anything is made per layer; a
	// file short of a tensor or two gets CheckSource's message naming it.
	zero, one := c, c
	zero.NLayer, one.NLayer = 0, 1
	if per := one.TensorCount() - zero.TensorCount(); c.NLayer > len(f.Tensors)/per {
		return fail(fmt.Errorf("%s%s %d exceeds what the file's %d tensors can hold (%d per layer)",
			r.prefix, keyBlockCount, c.NLayer, len(f.Tensors), per))
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

func (r *kvReader) str(key string) (string, bool) {
	if !r.has(key) {
		return "", false
	}
	v, err := r.f.String(r.prefix + key)
	if err != nil {
		r.errs = append(r.errs, err)
		return "", false
	}
	return v, true
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
	src := &hfSource{set: set, arch: c.Arch, extra: map[string]model.TensorData{}}
	if !src.hasHF("lm_head.weight") {
		c.TiedEmbeddings = true
	}
	src.tied = c.TiedEmbeddings
	if s, ok, _ := h.Llama3Scaling(); ok {
		src.addF32("rope_freqs.weight", model.Llama3RopeFreqs(c.RopeDims, float64(c.RopeTheta), s))
	}
	if short, long, _, ok, _ := h.LongRoPE(c.RopeDims); ok {
		src.addF32("rope_factors_short.weight", short)
		src.addF32("rope_factors_long.weight", long)
	}
	if err := c.CheckSource(src); err != nil {
		set.Close()
		return nil, fmt.Errorf("model: %s: %w", dir, err)
	}
	return &File{Config: c, Source: src, Dir: dir, Path: dir, closer: set.Close}, nil
}

// hfSource serves a Hugging Face checkpoint's tensors under GGUF names, as
// convert_hf_to_gguf.py would have written them, except that Llama's Q and K
// stay unpermuted (the config says RopeNeoX): 1-D tensors in F32, Gemma's
// norm weights plus one, GPT-2's Conv1D matrices transposed to [out, in],
// and the tensors the converter derives from config.json (extra).
type hfSource struct {
	set   *safetensors.Set
	arch  string
	extra map[string]model.TensorData
	tied  bool
}

func (s *hfSource) addF32(name string, v []float32) {
	b := make([]byte, 4*len(v))
	dtype.QuantizeRow(dtype.F32, b, v)
	s.extra[name] = model.TensorData{Name: name, Type: dtype.F32, Shape: []int{len(v)}, Data: b}
}

// hfName is the checkpoint's name of a GGUF tensor: the architecture's
// Hugging Face name, or for GPT-2 that name without "transformer.", as the
// original gpt2 checkpoints store it.
func (s *hfSource) hfName(name string) (string, bool) {
	hf, ok := model.HFName(s.arch, name)
	if !ok {
		return "", false
	}
	return hf, s.hasHF(hf)
}

func (s *hfSource) hasHF(hf string) bool { _, ok := s.resolve(hf); return ok }

func (s *hfSource) resolve(hf string) (string, bool) {
	if s.set.Has(hf) {
		return hf, true
	}
	if bare, ok := strings.CutPrefix(hf, "transformer."); ok && s.arch == "gpt2" && s.set.Has(bare) {
		return bare, true
	}
	return "", false
}

func (s *hfSource) Has(name string) bool {
	if _, ok := s.extra[name]; ok {
		return true
	}
	if name == "output.weight" && s.tied {
		return false
	}
	_, ok := s.hfName(name)
	return ok
}

func (s *hfSource) Tensor(name string) (model.TensorData, error) {
	if td, ok := s.extra[name]; ok {
		td.Shape = slices.Clone(td.Shape)
		return td, nil
	}
	if !s.Has(name) {
		return model.TensorData{}, fmt.Errorf("model: no tensor %q in the Hugging Face checkpoint", name)
	}
	hf, _ := s.hfName(name)
	hf, _ = s.resolve(hf)
	td, err := s.set.Tensor(hf)
	if err != nil {
		return model.TensorData{}, err
	}
	td.Name = name
	if len(td.Shape) == 1 {
		return s.vector(td)
	}
	if s.arch == "gpt2" && len(td.Shape) == 2 && name != "token_embd.weight" && name != "position_embd.weight" && name != "output.weight" {
		return transpose(td)
	}
	return td, nil
}

// vector returns a 1-D tensor as convert_hf_to_gguf.py writes it: F32
// (half-precision checkpoints store norms in F16 or BF16; widening is
// exact), and for Gemma a norm weight w as 1 + w, the scale Gemma's RMSNorm
// applies.
func (s *hfSource) vector(td model.TensorData) (model.TensorData, error) {
	gemmaNorm := (s.arch == "gemma2" || s.arch == "gemma3") && strings.HasSuffix(td.Name, "norm.weight")
	if td.Type == dtype.F32 && !gemmaNorm {
		return td, nil
	}
	if td.Type != dtype.F32 && td.Type != dtype.F16 && td.Type != dtype.BF16 {
		return td, fmt.Errorf("model: tensor %q: %v vectors are not supported", td.Name, td.Type)
	}
	f := make([]float32, td.Shape[0])
	dtype.DequantizeRow(td.Type, f, td.Data)
	if gemmaNorm {
		for i := range f {
			f[i]++
		}
	}
	b := make([]byte, 4*len(f))
	dtype.QuantizeRow(dtype.F32, b, f)
	td.Type, td.Data = dtype.F32, b
	return td, nil
}

// transpose turns a GPT-2 Conv1D weight, stored [in, out], into the
// [out, in] matrix every other layer stores, as the converter does.
func transpose(td model.TensorData) (model.TensorData, error) {
	if td.Type.Quantized() {
		return td, fmt.Errorf("model: tensor %q: cannot transpose %v", td.Name, td.Type)
	}
	in, out := td.Shape[0], td.Shape[1]
	es := td.Type.BlockBytes()
	if len(td.Data) != in*out*es {
		return td, fmt.Errorf("model: tensor %q: %d bytes for %v %v", td.Name, len(td.Data), td.Type, td.Shape)
	}
	b := make([]byte, len(td.Data))
	for i := range in {
		for o := range out {
			copy(b[(o*in+i)*es:(o*in+i+1)*es], td.Data[(i*out+o)*es:(i*out+o+1)*es])
		}
	}
	td.Shape, td.Data = []int{out, in}, b
	return td, nil
}

// ReleasePages releases a tensor's pages of its safetensors shard.
func (s *hfSource) ReleasePages(name string) {
	if hf, ok := s.hfName(name); ok {
		if hf, ok = s.resolve(hf); ok {
			s.set.ReleasePages(hf)
		}
	}
}

var _ model.PageReleaser = (*hfSource)(nil)
