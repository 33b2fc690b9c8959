package model

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// weights is the one declaration of the tensors glint reads, for every
// architecture: each tensor's GGUF name, its shape, whether a file of a
// config holds it, and its Hugging Face name. TensorShapes, TensorCount and
// CheckSource (a file's tensors), Weights (what package layers binds to the
// fields tagged with the GGUF name) and HFName/GGUFName all walk it.
//
// The order is the file's (llama.cpp's converter's): the model's own
// tensors listed before the first per-layer one come first, then each
// layer's, then the rest. A name may appear twice where a fused form
// stores it with another shape (Phi-3's ffn_up).
var weights = []weight{
	{name: "token_embd.weight", shape: dims(dVocab, dEmbd), hf: hf{llama: "model.embed_tokens.weight", gpt2: "transformer.wte.weight"}},
	{name: "position_embd.weight", shape: dims(dContext, dEmbd), in: func(c Config) bool { return c.NoRoPE },
		hf: hf{gpt2: "transformer.wpe.weight"}},
	// Hugging Face computes the RoPE divisors from config.json (rope_scaling).
	{name: "rope_freqs.weight", shape: dims(dRopeHalf), in: func(c Config) bool { return c.HasRopeFreqs }},
	{name: "rope_factors_long.weight", shape: dims(dRopeHalf), in: hasRopeFactors, readAs: "rope_freqs.weight"},
	{name: "rope_factors_short.weight", shape: dims(dRopeHalf), in: hasRopeFactors, readAs: "rope_freqs.weight"},

	{layer: true, name: "attn_norm.weight", shape: dims(dEmbd), hf: hf{llama: "input_layernorm.weight", gpt2: "ln_1.weight"}},
	{layer: true, name: "attn_norm.bias", shape: dims(dEmbd), in: layerNorm, hf: hf{gpt2: "ln_1.bias"}},
	{layer: true, name: "attn_qkv.weight", shape: dims(dQKV, dEmbd), in: fusedQKV, fused: true,
		hf: hf{llama: "self_attn.qkv_proj.weight", gpt2: "attn.c_attn.weight"}},
	{layer: true, name: "attn_qkv.bias", shape: dims(dQKV), in: func(c Config) bool { return c.FusedQKV && c.AttnBias }, fused: true,
		hf: hf{gpt2: "attn.c_attn.bias"}},
	{layer: true, name: "attn_q.weight", shape: dims(dQ, dEmbd), in: separateQKV, hf: hf{llama: "self_attn.q_proj.weight"}},
	{layer: true, name: "attn_q.bias", shape: dims(dQ), in: qkvBias, hf: hf{llama: "self_attn.q_proj.bias"}},
	{layer: true, name: "attn_k.weight", shape: dims(dKV, dEmbd), in: separateQKV, hf: hf{llama: "self_attn.k_proj.weight"}},
	{layer: true, name: "attn_k.bias", shape: dims(dKV), in: qkvBias, hf: hf{llama: "self_attn.k_proj.bias"}},
	{layer: true, name: "attn_v.weight", shape: dims(dKV, dEmbd), in: separateQKV, hf: hf{llama: "self_attn.v_proj.weight"}},
	{layer: true, name: "attn_v.bias", shape: dims(dKV), in: qkvBias, hf: hf{llama: "self_attn.v_proj.bias"}},
	{layer: true, name: "attn_q_norm.weight", shape: dims(dHeadDim), in: qkNorm, hf: hf{llama: "self_attn.q_norm.weight"}},
	{layer: true, name: "attn_k_norm.weight", shape: dims(dHeadDim), in: qkNorm, hf: hf{llama: "self_attn.k_norm.weight"}},
	{layer: true, name: "attn_output.weight", shape: dims(dEmbd, dQ), hf: hf{llama: "self_attn.o_proj.weight", gpt2: "attn.c_proj.weight"}},
	{layer: true, name: "attn_output.bias", shape: dims(dEmbd), in: outBias, hf: hf{gpt2: "attn.c_proj.bias"}},
	{layer: true, name: "post_attention_norm.weight", shape: dims(dEmbd), in: postNorms, hf: hf{gemma: "post_attention_layernorm.weight"}},
	{layer: true, name: "ffn_norm.weight", shape: dims(dEmbd),
		hf: hf{llama: "post_attention_layernorm.weight", gemma: "pre_feedforward_layernorm.weight", gpt2: "ln_2.weight"}},
	{layer: true, name: "ffn_norm.bias", shape: dims(dEmbd), in: layerNorm, hf: hf{gpt2: "ln_2.bias"}},
	{layer: true, name: "ffn_gate.weight", shape: dims(dFF, dEmbd), in: func(c Config) bool { return !c.NoGate && !c.FusedGateUp },
		hf: hf{llama: "mlp.gate_proj.weight"}},
	// Phi-3's gate and up, gate first.
	{layer: true, name: "ffn_up.weight", shape: dims(dFF2, dEmbd), in: fusedGateUp, fused: true, hf: hf{llama: "mlp.gate_up_proj.weight"}},
	{layer: true, name: "ffn_up.weight", shape: dims(dFF, dEmbd), in: func(c Config) bool { return !c.FusedGateUp },
		hf: hf{llama: "mlp.up_proj.weight", gpt2: "mlp.c_fc.weight"}},
	{layer: true, name: "ffn_up.bias", shape: dims(dFF), in: func(c Config) bool { return c.OutBias && c.NoGate }, hf: hf{gpt2: "mlp.c_fc.bias"}},
	{layer: true, name: "ffn_down.weight", shape: dims(dEmbd, dFF), hf: hf{llama: "mlp.down_proj.weight", gpt2: "mlp.c_proj.weight"}},
	{layer: true, name: "ffn_down.bias", shape: dims(dEmbd), in: outBias, hf: hf{gpt2: "mlp.c_proj.bias"}},
	{layer: true, name: "post_ffw_norm.weight", shape: dims(dEmbd), in: postNorms, hf: hf{gemma: "post_feedforward_layernorm.weight"}},

	{name: "output_norm.weight", shape: dims(dEmbd), hf: hf{llama: "model.norm.weight", gpt2: "transformer.ln_f.weight"}},
	{name: "output_norm.bias", shape: dims(dEmbd), in: layerNorm, hf: hf{gpt2: "transformer.ln_f.bias"}},
	{name: "output.weight", shape: dims(dVocab, dEmbd), in: func(c Config) bool { return !c.TiedEmbeddings },
		hf: hf{llama: "lm_head.weight", gpt2: "lm_head.weight"}},
}

// The conditions more than one tensor shares.
func hasRopeFactors(c Config) bool { return c.HasRopeFactors }
func layerNorm(c Config) bool      { return c.LayerNorm }
func fusedQKV(c Config) bool       { return c.FusedQKV }
func separateQKV(c Config) bool    { return !c.FusedQKV }
func qkvBias(c Config) bool        { return c.AttnBias && !c.FusedQKV }
func qkNorm(c Config) bool         { return c.QKNorm }
func outBias(c Config) bool        { return c.OutBias }
func postNorms(c Config) bool      { return c.PostNorms }
func fusedGateUp(c Config) bool    { return c.FusedGateUp }

// weight is one entry of the weights table.
type weight struct {
	name  string // GGUF name; a layer's without "blk.N."
	layer bool
	shape []dim
	// in reports whether a file of config c holds the tensor; nil: every
	// file does.
	in func(c Config) bool
	// fused: the layers read it as the separate tensors Unfused cuts it
	// into, never by its own name.
	fused bool
	// readAs names the tensor the layers read this one in place of (Phi-3's
	// LongRoPE factors serve as rope_freqs; see ropeFreqsName).
	readAs string
	hf     hf
}

func (w *weight) holds(c Config) bool { return w.in == nil || w.in(c) }

// hf is a tensor's Hugging Face name in each naming style (hfStyles); an
// empty gemma name is llama's.
type hf struct{ llama, gemma, gpt2 string }

// dim is a size a shape is made of, read from a Config.
type dim uint8

const (
	dEmbd     dim = iota
	dVocab        // vocabulary
	dContext      // trained context
	dQ            // heads·headDim
	dKV           // kvHeads·headDim
	dQKV          // q, k and v fused
	dFF           // feed-forward length
	dFF2          // gate and up fused
	dHeadDim      // one head
	dRopeHalf     // rotated dims / 2
)

func dims(d ...dim) []dim { return d }

func (d dim) of(c Config) int {
	q, kv := c.NHead*c.HeadDim, c.NHeadKV*c.HeadDim
	return [...]int{dEmbd: c.NEmbd, dVocab: c.Vocab, dContext: c.Context, dQ: q, dKV: kv, dQKV: q + 2*kv,
		dFF: c.NFF, dFF2: 2 * c.NFF, dHeadDim: c.HeadDim, dRopeHalf: c.RopeDims / 2}[d]
}

func (w *weight) shapeOf(c Config) []int {
	s := make([]int, len(w.shape))
	for i, d := range w.shape {
		s[i] = d.of(c)
	}
	return s
}

// layerPrefix is the GGUF prefix of layer i's tensors.
func layerPrefix(i int) string { return ggufLayerPrefix + strconv.Itoa(i) + "." }

const ggufLayerPrefix = "blk."

// walk calls yield with each entry of weights for the model's own tensors
// and each layer's in file order, the layer -1 for the model's own, until
// yield returns false: the model's own listed before the first per-layer
// entry, then every layer, then the rest of the model's own. Nothing is
// made per layer, so that a check stops at the first mismatch without
// first listing every layer a file claims.
func walk(nLayer int, yield func(w *weight, layer int) bool) {
	first := slices.IndexFunc(weights, func(w weight) bool { return w.layer })
	for i := range weights {
		if !weights[i].layer && i < first && !yield(&weights[i], -1) {
			return
		}
	}
	for l := range max(nLayer, 0) {
		for i := range weights {
			if weights[i].layer && !yield(&weights[i], l) {
				return
			}
		}
	}
	for i := range weights {
		if !weights[i].layer && i > first && !yield(&weights[i], -1) {
			return
		}
	}
}

// fullName is w's GGUF name in layer (-1: the model's own).
func (w *weight) fullName(layer int) string {
	if layer < 0 {
		return w.name
	}
	return layerPrefix(layer) + w.name
}

// Weight is a tensor as package layers reads it from Unfused(src, c): the
// field it fills, tagged `gguf:"Key"` (on layers.Layer for a layer's, on
// layers.Model for the model's own), the name it reads, and whether the
// config requires it. A tensor the config does not require is read where
// a source has it anyway, as llama.cpp reads its optional tensors.
type Weight struct {
	Key      string // GGUF name without "blk.N.": the field's tag
	Layer    int    // the layer, or -1 for the model's own
	Name     string // the GGUF name to read
	Shape    []int
	Required bool
}

// Weights lists what the layers read, for a KV cache of ctx cells (which
// picks Phi-3's LongRoPE factors as llama.cpp does). It is made per layer:
// call it after CheckSource has held the config's layer count to a file.
func (c Config) Weights(ctx int) []Weight {
	// What Unfused serves: the separate tensors in place of fused ones.
	u := c
	u.FusedQKV, u.FusedGateUp = false, false
	var ws []Weight
	walk(c.NLayer, func(w *weight, layer int) bool {
		if w.fused || w.readAs != "" {
			return true
		}
		r := Weight{Key: w.name, Layer: layer, Name: w.fullName(layer), Shape: w.shapeOf(u), Required: w.holds(u)}
		if w.name == "rope_freqs.weight" && c.HasRopeFactors {
			r.Name, r.Required = c.ropeFreqsName(ctx), true
		}
		ws = append(ws, r)
		return true
	})
	return ws
}

// ropeFreqsName is the LongRoPE factors for a context of ctx: the long
// ones beyond the original context.
func (c Config) ropeFreqsName(ctx int) string {
	if ctx > c.RopeOrigContext {
		return "rope_factors_long.weight"
	}
	return "rope_factors_short.weight"
}

// TensorShapes lists the GGUF name and row-major shape of every tensor a
// model with this config has, named and shaped as llama.cpp's converter
// writes them (Phi-3's and GPT-2's fused matrices included): the weights
// table (weights.go) evaluated for c. Loaders check files against it and
// package synth generates from it.
func (c Config) TensorShapes() []TensorShape {
	var ts []TensorShape
	c.eachTensor(func(t TensorShape) bool { ts = append(ts, t); return true })
	return ts
}

// TensorCount is len(c.TensorShapes()), counted without listing them: a
// hostile file may claim millions of layers, and the count is what such a
// claim is checked against before anything is made per layer.
func (c Config) TensorCount() int {
	n := 0
	for i := range weights {
		if w := &weights[i]; w.holds(c) {
			if w.layer {
				n += max(c.NLayer, 0)
			} else {
				n++
			}
		}
	}
	return n
}

// eachTensor calls yield with each tensor of TensorShapes in its order
// until yield returns false.
func (c Config) eachTensor(yield func(TensorShape) bool) {
	walk(c.NLayer, func(w *weight, layer int) bool {
		if !w.holds(c) {
			return true
		}
		return yield(TensorShape{w.fullName(layer), w.shapeOf(c)})
	})
}

// TensorShape is a tensor's GGUF name and row-major shape.
type TensorShape struct {
	Name  string
	Shape []int
}

// CheckSource verifies that src holds every tensor of the config with the
// expected shape, so that a mismatched file fails when it is opened rather
// than deep inside a forward pass. It stops at the first mismatch: a file
// claiming a million layers fails at the first layer it lacks.
func (c Config) CheckSource(src Source) error {
	var err error
	c.eachTensor(func(ts TensorShape) bool {
		if !src.Has(ts.Name) {
			err = fmt.Errorf("model: tensor %q is missing", ts.Name)
			return false
		}
		td, terr := src.Tensor(ts.Name)
		if terr != nil {
			err = fmt.Errorf("model: %w", terr)
			return false
		}
		if !slices.Equal(td.Shape, ts.Shape) {
			err = fmt.Errorf("model: tensor %q has shape %v, want %v for this config", ts.Name, td.Shape, ts.Shape)
			return false
		}
		return true
	})
	return err
}

// hfStyles is each architecture's Hugging Face naming: which of a
// tensor's hf names it uses, and its layers' prefix.
var hfStyles = map[string]struct {
	name        func(hf) string
	layerPrefix string
}{
	"llama":  {llamaStyle, "model.layers."},
	"qwen2":  {llamaStyle, "model.layers."},
	"qwen3":  {llamaStyle, "model.layers."},
	"phi3":   {llamaStyle, "model.layers."},
	"gemma2": {gemmaStyle, "model.layers."},
	"gemma3": {gemmaStyle, "model.layers."},
	// GPT-2's names carry a "transformer." prefix in most checkpoints
	// (GPT2LMHeadModel); the original gpt2 files leave it out, which the
	// Hugging Face loader (model/load) accepts too.
	"gpt2": {func(h hf) string { return h.gpt2 }, "transformer.h."},
}

func llamaStyle(h hf) string { return h.llama }
func gemmaStyle(h hf) string { return cmpOr(h.gemma, h.llama) }

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// hfArchConfig is what arch fixes, with an LM head: a checkpoint names
// lm_head.weight whether or not the config ties it.
func hfArchConfig(arch string) (Config, bool) {
	if _, ok := hfStyles[arch]; !ok {
		return Config{}, false
	}
	c, err := Config{Arch: arch}.WithArch()
	if err != nil {
		return Config{}, false
	}
	c.TiedEmbeddings = false
	return c, true
}

// GGUFName returns the GGUF name of a Hugging Face tensor of architecture
// arch.
func GGUFName(arch, name string) (string, bool) {
	return mapName(arch, name, true)
}

// HFName returns the Hugging Face name of a GGUF tensor of architecture
// arch.
func HFName(arch, name string) (string, bool) {
	return mapName(arch, name, false)
}

// mapName translates name between the architecture's GGUF and Hugging
// Face names (toGGUF: from Hugging Face), carrying the layer number across.
func mapName(arch, name string, toGGUF bool) (string, bool) {
	c, ok := hfArchConfig(arch)
	if !ok {
		return "", false
	}
	st := hfStyles[arch]
	fromPrefix, toPrefix := ggufLayerPrefix, st.layerPrefix
	if toGGUF {
		fromPrefix, toPrefix = toPrefix, fromPrefix
	}
	num, suffix, layer := "", name, false
	if rest, ok := strings.CutPrefix(name, fromPrefix); ok {
		var found bool
		if num, suffix, found = strings.Cut(rest, "."); found {
			n, err := strconv.Atoi(num)
			layer = err == nil && n >= 0 && strconv.Itoa(n) == num
		}
	}
	for i := range weights {
		w := &weights[i]
		h := st.name(w.hf)
		if h == "" || !w.holds(c) {
			continue
		}
		from, to := w.name, h
		if toGGUF {
			from, to = h, w.name
		}
		switch {
		case !w.layer && from == name:
			return to, true
		case w.layer && layer && from == suffix:
			return toPrefix + num + "." + to, true
		}
	}
	return "", false
}
