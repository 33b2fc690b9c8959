// Package synth writes deterministic random-weight models of named shapes
// and any architecture glint runs (model.Archs), as GGUF files (any glint
// storage type, with llama.cpp's quantisation mix; tensor names and metadata
// as llama.cpp's converter writes them, so llama.cpp reads them too) and as
// Hugging Face folders (config.json plus safetensors). Tests, demos and
// benchmarks use them where no real model of the right size can be shipped.
// The same options always give the same bytes, and the GGUF and Hugging Face
// forms of one seed hold the same weights (what convert_hf_to_gguf.py does
// between them undone: Llama's Q and K rows permuted, Gemma's norms stored
// as 1 + w, GPT-2's Conv1D matrices transposed).
package synth

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/glint-llm/glint/dtype"
	"github.com/glint-llm/glint/model"
	"github.com/glint-llm/glint/model/gguf"
	"github.com/glint-llm/glint/model/quant"
	"github.com/glint-llm/glint/model/safetensors"
	"github.com/glint-llm/glint/onnx/onnxtest"
)

// Options select what to write.
type Options struct {
	Arch  string // one of model.Archs; default "llama"
	Shape string // a key of Shapes
	// Type is a llama-quantize target (quant.FileTypeNames: "F32", "F16",
	// "BF16", "Q8_0", "Q4_0", "Q4_K_M", "IQ4_XS", …), each tensor typed by
	// llama.cpp's mix rules (for Q4_0: the output matrix — the token
	// embedding when tied — is Q6_K when its rows are whole 256-blocks,
	// else Q8_0), or "Q4_0-pure" (Q4_0 everywhere). 1-D tensors are always
	// F32. Default "F32".
	Type string
	Seed uint64
	Std  float32 // weight standard deviation, default 0.02
	// VocabGGUF, if set, is a GGUF file whose tokenizer.* metadata is
	// copied; its token count sets the vocabulary size. Otherwise a small
	// built-in byte-level BPE vocabulary is generated.
	VocabGGUF string
	// Progress, if set, is called as tensor bytes are produced.
	Progress func(done, total int64)
}

// plan is a resolved set of options.
type plan struct {
	o     Options
	shape Shape
	cfg   model.Config
	std   float32
	// weight is the target's default type (that of most layer matrices);
	// types is every tensor's storage type, by name.
	weight   dtype.Type
	types    map[string]dtype.Type
	fileType uint32
}

func newPlan(o Options, vocabSize int) (*plan, error) {
	s, err := LookupShape(o.Shape)
	if err != nil {
		return nil, err
	}
	if o.Type == "" {
		o.Type = "F32"
	}
	p := &plan{o: o, shape: s, std: o.Std}
	if p.std == 0 {
		p.std = 0.02
	}
	if !(p.std > 0) || math.IsInf(float64(p.std), 0) {
		return nil, fmt.Errorf("synth: standard deviation %g must be positive", p.std)
	}
	name := o.Type
	if name == "Q4_0-pure" {
		name = "Q4_0"
	}
	ft, err := quant.LookupFileType(name)
	if err != nil {
		return nil, fmt.Errorf("synth: unknown type %q (want %s or Q4_0-pure)", o.Type, strings.Join(quant.FileTypeNames(), ", "))
	}
	p.fileType, p.weight = ft.ID, ft.Default
	if p.cfg, err = s.Config(o.Arch); err != nil {
		return nil, err
	}
	if vocabSize > 0 {
		p.cfg.Vocab = vocabSize
	}
	if err := p.cfg.Validate(); err != nil {
		return nil, err
	}
	// The weights are generated as float32, so the types are those
	// llama-quantize would give an F32 file of this shape.
	var ts []quant.Tensor
	for _, t := range p.cfg.TensorShapes() {
		dims := make([]int, len(t.Shape))
		for i, d := range t.Shape {
			dims[len(dims)-1-i] = d
		}
		ts = append(ts, quant.Tensor{Name: t.Name, Dims: dims, Type: dtype.F32})
	}
	quant.Order(ts)
	m := quant.Model{Arch: p.cfg.Arch, NLayer: p.cfg.NLayer, NHead: p.cfg.NHead, NHeadKV: p.cfg.NHeadKV}
	if p.types, err = quant.Types(ft, m, ts); err != nil {
		return nil, fmt.Errorf("synth: shape %q cannot be stored as %s: %w", s.Name, o.Type, err)
	}
	for _, t := range p.cfg.TensorShapes() {
		if o.Type == "Q4_0-pure" && len(t.Shape) == 2 {
			p.types[t.Name] = dtype.Q4_0
		}
		if _, err := p.types[t.Name].Bytes(t.Shape...); err != nil {
			return nil, fmt.Errorf("synth: shape %q cannot be stored as %s: tensor %q: %w", s.Name, o.Type, t.Name, err)
		}
	}
	return p, nil
}

// typeOf is the storage type of a GGUF tensor.
func (p *plan) typeOf(name string, shape []int) dtype.Type {
	if t, ok := p.types[name]; ok {
		return t
	}
	if len(shape) == 1 {
		return dtype.F32
	}
	return p.weight
}

// qkHeads returns the number of heads whose rows GGUF permutes in the named
// tensor, or 0 for tensors stored as generated (every architecture but
// llama keeps Hugging Face's order).
func (p *plan) qkHeads(name string) int {
	if p.cfg.Arch != "llama" {
		return 0
	}
	switch {
	case strings.HasSuffix(name, ".attn_q.weight"):
		return p.cfg.NHead
	case strings.HasSuffix(name, ".attn_k.weight"):
		return p.cfg.NHeadKV
	}
	return 0
}

// row fills dst with row r of the named tensor in Hugging Face order. Each
// row has its own PCG stream, keyed by the seed, the tensor's GGUF name and
// the row, so rows can be made in any order and in parallel, and the GGUF
// and Hugging Face writers agree. Norm weights are 1 plus noise, so that a
// backend that ignores a norm's weights is caught; biases are noise (hfNorm:
// the noise alone, Gemma's Hugging Face norms). GPT-2's output matrix is a
// copy of token_embd, as its converter writes it.
func (p *plan) row(name string, r int, dst []float32) {
	if p.cfg.Arch == "gpt2" && name == "output.weight" {
		name = "token_embd.weight"
	}
	isNorm := strings.HasSuffix(name, "norm.weight")
	h := fnv.New64a()
	h.Write([]byte(name))
	rng := rand.New(rand.NewPCG(p.o.Seed, h.Sum64()^uint64(r)*0x9E3779B97F4A7C15))
	for i := range dst {
		v := float32(rng.NormFloat64()) * p.std
		if isNorm {
			v += 1
		}
		dst[i] = v
	}
}

// ropeFactors are Phi-3's LongRoPE divisors of the pair frequencies:
// deterministic, growing from 1 towards the low frequencies as real ones
// do (short to 1.5, long to 8).
func ropeFactors(name string, n int) []float32 {
	top := float32(1.5)
	if name == "rope_factors_long.weight" {
		top = 8
	}
	out := make([]float32, n)
	for i := range out {
		out[i] = 1 + (top-1)*float32(i)/float32(max(1, n-1))
	}
	return out
}

// tensorWriter returns the function that streams a tensor's bytes: rows
// are generated and quantised in parallel chunks and written in order.
// hf selects the Hugging Face form: rows unpermuted, Gemma's norms without
// their 1, GPT-2's Conv1D matrices transposed.
func (p *plan) tensorWriter(name string, shape []int, dt dtype.Type, hf bool, progress func(int64)) func(io.Writer) error {
	rows, cols := 1, shape[len(shape)-1]
	if len(shape) == 2 {
		rows = shape[0]
	}
	heads := 0
	if !hf {
		heads = p.qkHeads(name)
	}
	var fixed []float32
	switch name {
	case "rope_freqs.weight":
		fixed = model.Llama3RopeFreqs(p.cfg.RopeDims, float64(p.cfg.RopeTheta), llama3Scaling)
	case "rope_factors_long.weight", "rope_factors_short.weight":
		fixed = ropeFactors(name, p.cfg.RopeDims/2)
	}
	if fixed != nil {
		return func(w io.Writer) error {
			b := make([]byte, 4*len(fixed))
			dtype.QuantizeRow(dtype.F32, b, fixed)
			progress(int64(len(b)))
			_, err := w.Write(b)
			return err
		}
	}
	gemmaNorm := hf && (p.cfg.Arch == "gemma2" || p.cfg.Arch == "gemma3") && strings.HasSuffix(name, "norm.weight")
	fill := func(r int, dst []float32) {
		p.row(name, r, dst)
		if gemmaNorm {
			for i := range dst {
				dst[i]-- // exact: the GGUF's 1 + noise, less 1, is the noise
			}
		}
	}
	if hf && p.conv1D(name) {
		return p.transposedWriter(rows, cols, dt, fill, progress)
	}
	return func(w io.Writer) error {
		rb, err := dt.RowBytes(cols)
		if err != nil {
			return err
		}
		src := func(g int) int { return g }
		if heads > 0 {
			// GGUF row g of head h holds Hugging Face row h·hd + j·hd/2 + i
			// where g = h·hd + 2i + j (model.PermuteQK).
			hd := rows / heads
			src = func(g int) int {
				h, k := g/hd, g%hd
				return h*hd + (k%2)*(hd/2) + k/2
			}
		}
		return parallelRows(w, rows, rb, func(r int, dst []byte, scratch []float32) {
			fill(src(r), scratch[:cols])
			dtype.QuantizeRow(dt, dst, scratch[:cols])
		}, cols, progress)
	}
}

// conv1D reports whether a tensor is one of GPT-2's Conv1D matrices, which
// Hugging Face stores as [in, out].
func (p *plan) conv1D(name string) bool {
	if p.cfg.Arch != "gpt2" {
		return false
	}
	for _, s := range []string{".attn_qkv.weight", ".attn_output.weight", ".ffn_up.weight", ".ffn_down.weight"} {
		if strings.HasSuffix(name, s) {
			return true
		}
	}
	return false
}

// transposedWriter writes the [rows, cols] matrix fill makes as [cols, rows]
// (held whole in memory: GPT-2's matrices are small).
func (p *plan) transposedWriter(rows, cols int, dt dtype.Type, fill func(int, []float32), progress func(int64)) func(io.Writer) error {
	return func(w io.Writer) error {
		m := make([]float32, rows*cols)
		for r := range rows {
			fill(r, m[r*cols:(r+1)*cols])
		}
		col := make([]float32, rows)
		rb, err := dt.RowBytes(rows)
		if err != nil {
			return err
		}
		b := make([]byte, rb)
		for c := range cols {
			for r := range rows {
				col[r] = m[r*cols+c]
			}
			dtype.QuantizeRow(dt, b, col)
			if _, err := w.Write(b); err != nil {
				return err
			}
			progress(int64(rb))
		}
		return nil
	}
}

// parallelRows produces rows·rowBytes bytes with fill, in chunks of about
// 1 MiB spread over the CPUs, writing the chunks to w in order. At most two
// chunks per worker are in flight, so memory stays bounded.
func parallelRows(w io.Writer, rows, rowBytes int, fill func(r int, dst []byte, scratch []float32), cols int, progress func(int64)) error {
	chunkRows := max(1, (1<<20)/max(1, rowBytes))
	nChunks := (rows + chunkRows - 1) / chunkRows
	workers := runtime.GOMAXPROCS(0)
	type chunk struct {
		buf  []byte
		done chan struct{}
	}
	chunks := make(chan *chunk, 2*workers)
	type job struct {
		c  int
		ch *chunk
	}
	jobs := make(chan job)
	go func() {
		// The writer sees each chunk, in order, before a worker does.
		for c := 0; c < nChunks; c++ {
			ch := &chunk{done: make(chan struct{})}
			chunks <- ch
			jobs <- job{c, ch}
		}
		close(jobs)
	}()
	var stop atomic.Bool
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			scratch := make([]float32, cols)
			for j := range jobs {
				c, ch := j.c, j.ch
				if !stop.Load() {
					r0, r1 := c*chunkRows, min(rows, (c+1)*chunkRows)
					ch.buf = make([]byte, (r1-r0)*rowBytes)
					for r := r0; r < r1; r++ {
						fill(r, ch.buf[(r-r0)*rowBytes:(r-r0+1)*rowBytes], scratch)
					}
				}
				close(ch.done)
			}
		}()
	}
	var err error
	for range nChunks {
		ch := <-chunks
		<-ch.done
		if err == nil {
			_, err = w.Write(ch.buf)
			progress(int64(len(ch.buf)))
			if err != nil {
				stop.Store(true)
			}
		}
		ch.buf = nil
	}
	wg.Wait()
	return err
}

// progressFunc adapts Options.Progress to a running byte count.
func progressFunc(o Options, total int64) func(int64) {
	var done atomic.Int64
	return func(n int64) {
		d := done.Add(n)
		if o.Progress != nil {
			o.Progress(d, total)
		}
	}
}

// WriteGGUF writes a llama GGUF file with random weights. Tensor data is
// generated while the file is written, so memory use does not grow with the
// model.
func WriteGGUF(path string, o Options) error {
	var voc *vocab
	var vocabKV []gguf.KV
	vocabSize := 0
	if o.VocabGGUF != "" {
		vf, err := gguf.Open(o.VocabGGUF)
		if err != nil {
			return fmt.Errorf("synth: vocabulary: %w", err)
		}
		for _, kv := range vf.KV {
			if strings.HasPrefix(kv.Key, "tokenizer.") {
				vocabKV = append(vocabKV, kv)
			}
		}
		if v, ok := vf.Get("tokenizer.ggml.tokens"); ok {
			vocabSize = v.Len()
		}
		vf.Close()
		if vocabSize == 0 {
			return fmt.Errorf("synth: vocabulary %s has no tokenizer.ggml.tokens", o.VocabGGUF)
		}
	}
	p, err := newPlan(o, vocabSize)
	if err != nil {
		return err
	}
	if o.VocabGGUF == "" {
		if voc, err = builtinVocab(p.cfg.Vocab); err != nil {
			return err
		}
	}
	w := gguf.NewWriter()
	c := p.cfg
	kvs := []struct {
		k string
		v any
	}{
		{"general.architecture", c.Arch},
		{"general.name", "glint synth " + p.shape.Name},
		{"general.file_type", p.fileType},
	}
	for _, kv := range kvs {
		if err := w.Add(kv.k, kv.v); err != nil {
			return fmt.Errorf("synth: %w", err)
		}
	}
	hp, err := gguf.HParams(c)
	if err != nil {
		return fmt.Errorf("synth: %w", err)
	}
	for _, kv := range hp {
		if err := w.Add(kv.Key, kv.Value); err != nil {
			return fmt.Errorf("synth: %w", err)
		}
	}
	if p.weight.Quantized() {
		if err := w.Add("general.quantization_version", uint32(2)); err != nil {
			return fmt.Errorf("synth: %w", err)
		}
	}
	if voc != nil {
		for _, kv := range []struct {
			k string
			v any
		}{
			{"tokenizer.ggml.model", "gpt2"},
			{"tokenizer.ggml.pre", builtinPre(c.Arch)},
			{"tokenizer.ggml.tokens", voc.tokens},
			{"tokenizer.ggml.token_type", voc.types},
			{"tokenizer.ggml.merges", voc.merges},
			{"tokenizer.ggml.bos_token_id", voc.bos},
			{"tokenizer.ggml.eos_token_id", voc.eos},
			{"tokenizer.ggml.eot_token_id", voc.eot},
			{"tokenizer.ggml.add_bos_token", true},
		} {
			if err := w.Add(kv.k, kv.v); err != nil {
				return fmt.Errorf("synth: %w", err)
			}
		}
	}
	for _, kv := range vocabKV {
		if err := w.Add(kv.Key, kv.Value); err != nil {
			return fmt.Errorf("synth: %w", err)
		}
	}
	shapes := c.TensorShapes()
	var total int64
	for _, ts := range shapes {
		n, err := p.typeOf(ts.Name, ts.Shape).Bytes(ts.Shape...)
		if err != nil {
			return fmt.Errorf("synth: tensor %q: %w", ts.Name, err)
		}
		total += int64(n)
	}
	progress := progressFunc(o, total)
	for _, ts := range shapes {
		dt := p.typeOf(ts.Name, ts.Shape)
		if err := w.AddTensorFunc(ts.Name, dt, ts.Shape, p.tensorWriter(ts.Name, ts.Shape, dt, false, progress)); err != nil {
			return fmt.Errorf("synth: %w", err)
		}
	}
	if err := w.WriteFile(path); err != nil {
		return fmt.Errorf("synth: %w", err)
	}
	return nil
}

// WriteHF writes the same model as WriteGGUF with the same options as a
// Hugging Face folder: config.json and model.safetensors with Hugging Face
// tensor names and unpermuted Q/K rows. Only F32, F16 and BF16 can be
// stored; every tensor, norms included, has that type, as in a Hugging Face
// checkpoint. No tokenizer files are written.
func WriteHF(dir string, o Options) error {
	p, err := hfFolder(dir, o, "WriteHF", nil)
	if err != nil {
		return err
	}
	c := p.cfg
	w := safetensors.NewWriter()
	w.SetMetadata("format", "pt")
	var shapes []model.TensorShape
	var total int64
	for _, ts := range c.TensorShapes() {
		switch {
		case ts.Name == "rope_freqs.weight" || strings.HasPrefix(ts.Name, "rope_factors_"):
			continue // Hugging Face computes them from rope_scaling
		case c.Arch == "gpt2" && ts.Name == "output.weight":
			continue // tied: the converter's copy of token_embd
		}
		n, _ := p.weight.Bytes(ts.Shape...)
		total += int64(n)
		shapes = append(shapes, ts)
	}
	progress := progressFunc(o, total)
	for _, ts := range shapes {
		hf, ok := model.HFName(c.Arch, ts.Name)
		if !ok {
			return fmt.Errorf("synth: tensor %q has no Hugging Face name", ts.Name)
		}
		shape := ts.Shape
		if p.conv1D(ts.Name) {
			shape = []int{shape[1], shape[0]}
		}
		if err := w.AddFunc(hf, p.weight, shape, p.tensorWriter(ts.Name, ts.Shape, p.weight, true, progress)); err != nil {
			return fmt.Errorf("synth: %w", err)
		}
	}
	if err := w.WriteFile(filepath.Join(dir, safetensors.SingleName)); err != nil {
		return fmt.Errorf("synth: %w", err)
	}
	return nil
}

// hfFolder starts a Hugging Face style folder for WriteHF and WriteONNX:
// it resolves the options (float types only: F32, F16 or BF16, and F32
// alone for ONNX) and writes config.json, the built-in tokenizer and,
// when gen is not nil, generation_config.json.
func hfFolder(dir string, o Options, what string, gen func(*vocab) map[string]any) (*plan, error) {
	if o.VocabGGUF != "" {
		return nil, fmt.Errorf("synth: %s: a vocabulary file is not supported", what)
	}
	p, err := newPlan(o, 0)
	if err != nil {
		return nil, err
	}
	torchDType := map[dtype.Type]string{dtype.F32: "float32", dtype.F16: "float16", dtype.BF16: "bfloat16"}[p.weight]
	switch {
	case torchDType == "":
		return nil, fmt.Errorf("synth: %s: type %s cannot be stored in safetensors (use F32, F16 or BF16)", what, o.Type)
	case gen != nil && p.weight != dtype.F32:
		return nil, fmt.Errorf("synth: %s: type %s (the graph is float32: use F32)", what, o.Type)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("synth: %w", err)
	}
	voc, err := builtinVocab(p.cfg.Vocab)
	if err != nil {
		return nil, err
	}
	cfg := hfConfig(p.cfg, voc)
	cfg["torch_dtype"] = torchDType
	files := map[string]any{"config.json": cfg}
	if gen != nil {
		files["generation_config.json"] = gen(voc)
	}
	for name, v := range files {
		js, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			return nil, fmt.Errorf("synth: %w", err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), append(js, '\n'), 0o644); err != nil {
			return nil, fmt.Errorf("synth: %w", err)
		}
	}
	if err := writeHFTokenizer(dir, voc); err != nil {
		return nil, err
	}
	return p, nil
}

// builtinPre is the tokenizer.ggml.pre the built-in byte-level vocabulary
// is written with: the architecture's own where llama.cpp has one.
func builtinPre(arch string) string {
	switch arch {
	case "qwen2", "qwen3":
		return "qwen2"
	case "gpt2":
		return "gpt-2"
	}
	return "llama-bpe"
}

// hfConfig is the config.json of a model of config c in its architecture's
// transformers class.
func hfConfig(c model.Config, voc *vocab) map[string]any {
	class := map[string][2]string{
		"llama": {"LlamaForCausalLM", "llama"}, "qwen2": {"Qwen2ForCausalLM", "qwen2"},
		"qwen3": {"Qwen3ForCausalLM", "qwen3"}, "gemma2": {"Gemma2ForCausalLM", "gemma2"},
		"gemma3": {"Gemma3ForCausalLM", "gemma3_text"}, "phi3": {"Phi3ForCausalLM", "phi3"},
		"gpt2": {"GPT2LMHeadModel", "gpt2"},
	}[c.Arch]
	cfg := map[string]any{
		"architectures": []string{class[0]},
		"model_type":    class[1],
		"vocab_size":    c.Vocab,
		"bos_token_id":  voc.bos,
		"eos_token_id":  voc.eos,
	}
	if c.Arch == "gpt2" {
		for k, v := range map[string]any{
			"n_embd": c.NEmbd, "n_layer": c.NLayer, "n_head": c.NHead, "n_positions": c.Context, "n_ctx": c.Context,
			"n_inner": c.NFF, "layer_norm_epsilon": c.RMSEps, "activation_function": "gelu_new", "tie_word_embeddings": true,
		} {
			cfg[k] = v
		}
		return cfg
	}
	for k, v := range map[string]any{
		"hidden_size": c.NEmbd, "num_hidden_layers": c.NLayer, "num_attention_heads": c.NHead,
		"num_key_value_heads": c.NHeadKV, "head_dim": c.HeadDim, "intermediate_size": c.NFF,
		"rms_norm_eps": c.RMSEps, "rope_theta": c.RopeTheta, "max_position_embeddings": c.Context,
		"tie_word_embeddings": c.TiedEmbeddings, "hidden_act": "silu",
	} {
		cfg[k] = v
	}
	switch c.Arch {
	case "llama":
		if c.HasRopeFreqs {
			cfg["rope_scaling"] = map[string]any{
				"rope_type":                        "llama3",
				"factor":                           llama3Scaling.Factor,
				"low_freq_factor":                  llama3Scaling.LowFreqFactor,
				"high_freq_factor":                 llama3Scaling.HighFreqFactor,
				"original_max_position_embeddings": llama3Scaling.OriginalContext,
			}
		}
	case "gemma2", "gemma3":
		delete(cfg, "hidden_act")
		cfg["hidden_activation"] = "gelu_pytorch_tanh"
		cfg["query_pre_attn_scalar"] = c.HeadDim
		cfg["sliding_window"] = c.SlidingWindow
		if c.Arch == "gemma2" {
			cfg["attn_logit_softcapping"] = c.AttnSoftCap
			cfg["final_logit_softcapping"] = c.FinalSoftCap
			break
		}
		cfg["rope_local_base_freq"] = c.RopeThetaSWA
		if c.RopeFreqScale > 0 && c.RopeFreqScale != 1 {
			cfg["rope_scaling"] = map[string]any{"rope_type": "linear", "factor": 1 / c.RopeFreqScale}
		}
		cfg["sliding_window_pattern"] = c.SWAPattern
		types := make([]string, c.NLayer)
		for il := range types {
			types[il] = "full_attention"
			if c.Sliding(il) {
				types[il] = "sliding_attention"
			}
		}
		cfg["layer_types"] = types
	case "phi3":
		cfg["sliding_window"] = c.SlidingWindow
		cfg["original_max_position_embeddings"] = c.RopeOrigContext
		short, long := ropeFactors("rope_factors_short.weight", c.RopeDims/2), ropeFactors("rope_factors_long.weight", c.RopeDims/2)
		cfg["rope_scaling"] = map[string]any{"type": "longrope", "short_factor": short, "long_factor": long}
	}
	return cfg
}

// WriteONNX writes the same Gemma 3 model as WriteGGUF with the same
// options as an ONNX decoder folder that glint's ONNX Runtime path runs
// (model.onnx with Gemma 3 270M's signature, config.json,
// generation_config.json and the built-in tokenizer as tokenizer.json):
// the independent engine the native Gemma 3 path is checked against. The
// graph is onnxtest.WriteGemma3's, in float32, so only F32 is accepted;
// weights past 1 GiB go to model.onnx_data.
func WriteONNX(dir string, o Options) error {
	if o.Arch != "gemma3" {
		return fmt.Errorf("synth: WriteONNX: architecture %q (only gemma3)", o.Arch)
	}
	gen := func(voc *vocab) map[string]any {
		return map[string]any{"bos_token_id": voc.bos, "eos_token_id": []uint32{voc.eos, voc.eot}}
	}
	p, err := hfFolder(dir, o, "WriteONNX", gen)
	if err != nil {
		return err
	}
	c := p.cfg
	shapes := map[string][]int{}
	var total int64
	for _, ts := range c.TensorShapes() {
		shapes[ts.Name] = ts.Shape
		total += 4 * int64(elems(ts.Shape))
	}
	progress := progressFunc(o, total)
	weight := func(hf string) ([]float32, error) {
		name, ok := model.GGUFName(c.Arch, hf)
		if !ok || shapes[name] == nil {
			return nil, fmt.Errorf("synth: no tensor for Hugging Face name %q", hf)
		}
		var buf bytes.Buffer
		if err := p.tensorWriter(name, shapes[name], dtype.F32, true, progress)(&buf); err != nil {
			return nil, err
		}
		f := make([]float32, buf.Len()/4)
		dtype.DequantizeRow(dtype.F32, f, buf.Bytes())
		return f, nil
	}
	external := ""
	if total > 1<<30 {
		external = "model.onnx_data"
	}
	g := onnxtest.Gemma3{
		Vocab: c.Vocab, Hidden: c.NEmbd, Layers: c.NLayer, QHeads: c.NHead, KVHeads: c.NHeadKV, HeadDim: c.HeadDim,
		FF: c.NFF, RMSEps: c.RMSEps, RopeTheta: float64(c.RopeTheta), RopeLocalTheta: float64(c.RopeThetaSWA),
		Window: c.SlidingWindow, Pattern: c.SWAPattern, QueryPreAttnScalar: float64(c.HeadDim), Weight: weight,
		RopeFactor: 1 / float64(cmp.Or(c.RopeFreqScale, 1)),
	}
	if err := onnxtest.WriteGemma3(filepath.Join(dir, "model.onnx"), external, g); err != nil {
		return fmt.Errorf("synth: %w", err)
	}
	return nil
}

func elems(shape []int) int {
	n := 1
	for _, d := range shape {
		n *= d
	}
	return n
}
