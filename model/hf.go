package model

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
)

// HFConfig is the part of a Hugging Face config.json that glint reads, for
// every architecture it runs (Llama, Qwen 2/3, Gemma 2/3, Phi-3, GPT-2).
// Pointer fields are optional; Config applies transformers' defaults.
type HFConfig struct {
	Architectures     []string        `json:"architectures"`
	ModelType         string          `json:"model_type"`
	HiddenSize        int             `json:"hidden_size"`
	NumHiddenLayers   int             `json:"num_hidden_layers"`
	NumAttentionHeads int             `json:"num_attention_heads"`
	NumKeyValueHeads  *int            `json:"num_key_value_heads,omitempty"`
	HeadDim           *int            `json:"head_dim,omitempty"`
	IntermediateSize  int             `json:"intermediate_size"`
	RMSNormEps        *float64        `json:"rms_norm_eps,omitempty"`
	RopeTheta         *float64        `json:"rope_theta,omitempty"`
	MaxPositions      *int            `json:"max_position_embeddings,omitempty"`
	VocabSize         *int            `json:"vocab_size,omitempty"`
	TieWordEmbeddings *bool           `json:"tie_word_embeddings,omitempty"`
	RopeScaling       *HFRopeScaling  `json:"rope_scaling,omitempty"`
	BOSTokenID        json.RawMessage `json:"bos_token_id,omitempty"`
	EOSTokenID        json.RawMessage `json:"eos_token_id,omitempty"`
	TorchDType        string          `json:"torch_dtype,omitempty"`
	HiddenAct         string          `json:"hidden_act,omitempty"`
	HiddenActivation  string          `json:"hidden_activation,omitempty"` // Gemma's name for it

	// Qwen 2, Gemma and Phi-3 sliding windows.
	SlidingWindow    *int `json:"sliding_window,omitempty"`
	UseSlidingWindow bool `json:"use_sliding_window,omitempty"` // Qwen 2: off in every released model
	// Gemma 2/3.
	QueryPreAttnScalar    *float64 `json:"query_pre_attn_scalar,omitempty"`
	AttnLogitSoftcapping  *float64 `json:"attn_logit_softcapping,omitempty"`
	FinalLogitSoftcapping *float64 `json:"final_logit_softcapping,omitempty"`
	RopeLocalBaseFreq     *float64 `json:"rope_local_base_freq,omitempty"`
	SlidingWindowPattern  *int     `json:"sliding_window_pattern,omitempty"`
	SlidingWindowPattern_ *int     `json:"_sliding_window_pattern,omitempty"`
	LayerTypes            []string `json:"layer_types,omitempty"`
	// Phi-3.
	PartialRotaryFactor  *float64 `json:"partial_rotary_factor,omitempty"`
	OriginalMaxPositions *int     `json:"original_max_position_embeddings,omitempty"`
	// GPT-2's own names.
	NEmbd            int      `json:"n_embd,omitempty"`
	NLayer           int      `json:"n_layer,omitempty"`
	NHead            int      `json:"n_head,omitempty"`
	NPositions       int      `json:"n_positions,omitempty"`
	NInner           *int     `json:"n_inner,omitempty"`
	LayerNormEpsilon *float64 `json:"layer_norm_epsilon,omitempty"`
}

// HFRopeScaling is config.json's rope_scaling object.
type HFRopeScaling struct {
	RopeType                      string  `json:"rope_type"`
	Type                          string  `json:"type,omitempty"` // older spelling of rope_type
	Factor                        float64 `json:"factor"`
	LowFreqFactor                 float64 `json:"low_freq_factor"`
	HighFreqFactor                float64 `json:"high_freq_factor"`
	OriginalMaxPositionEmbeddings int     `json:"original_max_position_embeddings"`
	// LongRoPE (Phi-3): per-pair frequency divisors.
	ShortFactor []float64 `json:"short_factor,omitempty"`
	LongFactor  []float64 `json:"long_factor,omitempty"`
}

// kind is the scaling's type in lower case ("" when there is none).
func (rs *HFRopeScaling) kind() string {
	if rs == nil {
		return ""
	}
	t := rs.RopeType
	if t == "" {
		t = rs.Type
	}
	return strings.ToLower(t)
}

// hfArchs maps config.json's architectures (and model_type) to glint's.
var hfArchs = []struct{ class, modelType, arch string }{
	{"LlamaForCausalLM", "llama", "llama"},
	{"Qwen2ForCausalLM", "qwen2", "qwen2"},
	{"Qwen3ForCausalLM", "qwen3", "qwen3"},
	{"Gemma2ForCausalLM", "gemma2", "gemma2"},
	{"Gemma3ForCausalLM", "gemma3_text", "gemma3"},
	{"Phi3ForCausalLM", "phi3", "phi3"},
	{"GPT2LMHeadModel", "gpt2", "gpt2"},
}

// Arch returns glint's name of the config's architecture.
func (h HFConfig) Arch() (string, error) {
	for _, a := range hfArchs {
		if slices.Contains(h.Architectures, a.class) {
			return a.arch, nil
		}
	}
	for _, a := range hfArchs {
		if h.ModelType == a.modelType {
			return a.arch, nil
		}
	}
	var classes []string
	for _, a := range hfArchs {
		classes = append(classes, a.class)
	}
	return "", fmt.Errorf("model: config.json: architecture %v (model_type %q) is not supported (supported: %s)",
		h.Architectures, h.ModelType, strings.Join(classes, ", "))
}

// ParseHFConfig decodes a config.json.
func ParseHFConfig(data []byte) (HFConfig, error) {
	var h HFConfig
	if err := json.Unmarshal(data, &h); err != nil {
		return h, fmt.Errorf("model: config.json: %w", err)
	}
	return h, nil
}

// Llama3Scaling returns the Llama 3 rope scaling, if the config has one;
// an unsupported scaling type is an error, since ignoring it would run the
// model with the wrong positions.
func (h HFConfig) Llama3Scaling() (RopeScaling, bool, error) {
	rs := h.RopeScaling
	switch typ := rs.kind(); typ {
	case "llama3":
	case "default", "", "linear":
		return RopeScaling{}, false, nil
	default:
		return RopeScaling{}, false, fmt.Errorf("model: config.json: rope_scaling type %q is not supported (only llama3 and linear)", typ)
	}
	// Defaults as in convert_hf_to_gguf.py.
	s := RopeScaling{Factor: 8, LowFreqFactor: 1, HighFreqFactor: 4, OriginalContext: 8192}
	if rs.Factor != 0 {
		s.Factor = rs.Factor
	}
	if rs.LowFreqFactor != 0 {
		s.LowFreqFactor = rs.LowFreqFactor
	}
	if rs.HighFreqFactor != 0 {
		s.HighFreqFactor = rs.HighFreqFactor
	}
	if rs.OriginalMaxPositionEmbeddings != 0 {
		s.OriginalContext = rs.OriginalMaxPositionEmbeddings
	}
	if !(s.Factor > 0) || !(s.LowFreqFactor > 0) || !(s.HighFreqFactor > s.LowFreqFactor) || s.OriginalContext <= 0 {
		return RopeScaling{}, false, fmt.Errorf("model: config.json: invalid llama3 rope_scaling %+v", *rs)
	}
	return s, true, nil
}

// LongRoPE returns Phi-3's LongRoPE factors (rope_factors_short and _long,
// one per rotated pair) and the attention factor that scales cos and sin,
// as convert_hf_to_gguf.py derives them, if the config has them.
func (h HFConfig) LongRoPE(ropeDims int) (short, long []float32, attnFactor float32, ok bool, err error) {
	rs := h.RopeScaling
	switch rs.kind() {
	case "longrope", "su":
	default:
		return nil, nil, 0, false, nil
	}
	if len(rs.ShortFactor) != ropeDims/2 || len(rs.LongFactor) != ropeDims/2 {
		return nil, nil, 0, false, fmt.Errorf("model: config.json: LongRoPE has %d short and %d long factors, want %d each",
			len(rs.ShortFactor), len(rs.LongFactor), ropeDims/2)
	}
	for i := range rs.ShortFactor {
		short = append(short, float32(rs.ShortFactor[i]))
		long = append(long, float32(rs.LongFactor[i]))
	}
	orig, maxPos := 0, 0
	if h.OriginalMaxPositions != nil {
		orig = *h.OriginalMaxPositions
	}
	if h.MaxPositions != nil {
		maxPos = *h.MaxPositions
	}
	return short, long, LongRoPEAttnFactor(maxPos, orig), true, nil
}

// LongRoPEAttnFactor is LongRoPE's scale of cos and sin for a model of
// context ctx trained from context orig, √(1 + ln(ctx/orig)/ln(orig)), as
// convert_hf_to_gguf.py computes it; 1 when ctx does not exceed orig.
func LongRoPEAttnFactor(ctx, orig int) float32 {
	if orig <= 1 || ctx <= orig {
		return 1
	}
	scale := float64(ctx) / float64(orig)
	return float32(math.Sqrt(1 + math.Log(scale)/math.Log(float64(orig))))
}

// Config converts to glint's Config, with transformers' defaults for each
// architecture's absent fields. Hugging Face checkpoints are not permuted, so
// RoPE rotates NeoX pairs. TiedEmbeddings follows tie_word_embeddings
// (transformers' default true, but false for Llama, Qwen 2 and Phi-3); a
// loader also sets it when lm_head.weight is absent.
func (h HFConfig) Config() (Config, error) {
	arch, err := h.Arch()
	if err != nil {
		return Config{}, err
	}
	fail := func(err error) (Config, error) { return Config{}, fmt.Errorf("model: config.json (%s): %w", arch, err) }
	c := Config{
		Arch:      arch,
		NLayer:    h.NumHiddenLayers,
		NEmbd:     h.HiddenSize,
		NHead:     h.NumAttentionHeads,
		NHeadKV:   h.NumAttentionHeads,
		NFF:       h.IntermediateSize,
		Vocab:     32000,
		Context:   2048,
		RMSEps:    1e-6,
		RopeTheta: 10000,
		RopeNeoX:  true,
	}
	tied := true
	switch arch {
	case "llama", "phi3":
		tied = false
	case "qwen2":
		c.Vocab, c.Context, tied = 151936, 32768, false
	case "qwen3":
		c.Vocab, c.Context = 151936, 32768
	case "gemma2", "gemma3":
		c.Vocab, c.Context, c.RopeTheta = 256000, 8192, 10000
	case "gpt2":
		c.NLayer, c.NEmbd, c.NHead, c.NHeadKV = h.NLayer, h.NEmbd, h.NHead, h.NHead
		c.Vocab, c.Context, c.RMSEps = 50257, 1024, 1e-5
		c.NFF = 4 * c.NEmbd
		if h.NInner != nil {
			c.NFF = *h.NInner
		}
		if h.NPositions > 0 {
			c.Context = h.NPositions
		}
		if h.LayerNormEpsilon != nil {
			c.RMSEps = float32(*h.LayerNormEpsilon)
		}
	}
	if h.TieWordEmbeddings != nil {
		tied = *h.TieWordEmbeddings
	}
	c.TiedEmbeddings = tied
	if h.NumKeyValueHeads != nil {
		c.NHeadKV = *h.NumKeyValueHeads
	}
	if h.HeadDim != nil {
		c.HeadDim = *h.HeadDim
	} else if c.NHead > 0 {
		c.HeadDim = c.NEmbd / c.NHead
	}
	c.RopeDims = c.HeadDim
	if h.PartialRotaryFactor != nil {
		c.RopeDims = int(float64(c.HeadDim) * *h.PartialRotaryFactor)
	}
	if h.RMSNormEps != nil {
		c.RMSEps = float32(*h.RMSNormEps)
	}
	if h.RopeTheta != nil {
		c.RopeTheta = float32(*h.RopeTheta)
	}
	if h.MaxPositions != nil {
		c.Context = *h.MaxPositions
	}
	if h.VocabSize != nil {
		c.Vocab = *h.VocabSize
	}
	if act := h.HiddenAct + h.HiddenActivation; act != "" {
		want := map[string][]string{"gemma2": {"gelu_pytorch_tanh"}, "gemma3": {"gelu_pytorch_tanh"}, "gpt2": {"gelu_new"}}[arch]
		if want == nil {
			want = []string{"silu"}
		}
		if !slices.Contains(want, act) {
			return fail(fmt.Errorf("activation %q is not supported (want %s)", act, strings.Join(want, " or ")))
		}
	}
	// Linear scaling, as convert_hf_to_gguf.py writes it: the angles
	// divided by the factor (Gemma 3 from 4B up, on its global layers).
	// Llama 3's and Phi-3's scalings are their frequency factors; any other
	// (YaRN, dynamic NTK) is refused rather than run with wrong positions.
	switch k := h.RopeScaling.kind(); {
	case k == "linear":
		if f := h.RopeScaling.Factor; f > 0 && f != 1 {
			c.RopeFreqScale = 1 / float32(f)
		}
	case k == "" || k == "default" || k == "llama3" && arch == "llama" || (k == "longrope" || k == "su") && arch == "phi3":
	default:
		return fail(fmt.Errorf("rope_scaling %q is not supported", k))
	}
	switch arch {
	case "llama":
		_, scaled, err := h.Llama3Scaling()
		if err != nil {
			return Config{}, err
		}
		c.HasRopeFreqs = scaled
	case "qwen2", "qwen3":
		if h.UseSlidingWindow {
			return fail(fmt.Errorf("use_sliding_window is not supported"))
		}
	case "gemma2", "gemma3":
		if h.QueryPreAttnScalar != nil {
			c.QueryScale = 1 / float32(math.Sqrt(*h.QueryPreAttnScalar))
		}
		c.SlidingWindow = 4096
		if h.SlidingWindow != nil {
			c.SlidingWindow = *h.SlidingWindow
		}
		if arch == "gemma2" {
			c.AttnSoftCap, c.FinalSoftCap = 50, 30
			if h.AttnLogitSoftcapping != nil {
				c.AttnSoftCap = float32(*h.AttnLogitSoftcapping)
			}
			if h.FinalLogitSoftcapping != nil {
				c.FinalSoftCap = float32(*h.FinalLogitSoftcapping)
			}
			break
		}
		if h.AttnLogitSoftcapping != nil || h.FinalLogitSoftcapping != nil {
			return fail(fmt.Errorf("soft-capping is not part of Gemma 3"))
		}
		c.RopeTheta = 1e6
		if h.RopeTheta != nil {
			c.RopeTheta = float32(*h.RopeTheta)
		}
		c.RopeThetaSWA = 10000
		if h.RopeLocalBaseFreq != nil {
			c.RopeThetaSWA = float32(*h.RopeLocalBaseFreq)
		}
		if c.SWAPattern, err = h.swaPattern(); err != nil {
			return fail(err)
		}
	case "phi3":
		if h.SlidingWindow != nil {
			c.SlidingWindow = *h.SlidingWindow
		}
		_, _, af, ok, err := h.LongRoPE(c.RopeDims)
		if err != nil {
			return Config{}, err
		}
		if ok {
			c.HasRopeFactors, c.RopeAttnFactor = true, af
			c.RopeOrigContext = c.Context
			if h.OriginalMaxPositions != nil {
				c.RopeOrigContext = *h.OriginalMaxPositions
			}
		}
	}
	if c, err = c.WithArch(); err != nil {
		return fail(err)
	}
	if arch == "gemma3" {
		// WithArch's default; the config's layer_types or pattern won.
		if c.SWAPattern, err = h.swaPattern(); err != nil {
			return fail(err)
		}
	}
	if err := c.Validate(); err != nil {
		return Config{}, fmt.Errorf("config.json: %w", err)
	}
	return c, nil
}

// swaPattern is Gemma 3's sliding-window period: from layer_types when the
// config lists them (which must follow one period), else
// sliding_window_pattern, else 6.
func (h HFConfig) swaPattern() (int, error) {
	p := 6
	for _, v := range []*int{h.SlidingWindowPattern, h.SlidingWindowPattern_} {
		if v != nil {
			p = *v
		}
	}
	if len(h.LayerTypes) > 0 {
		p = slices.Index(h.LayerTypes, "full_attention") + 1 // 0: every layer slides
		for il, t := range h.LayerTypes {
			sliding := p == 0 || il%p < p-1
			if want := map[bool]string{true: "sliding_attention", false: "full_attention"}[sliding]; t != want {
				return 0, fmt.Errorf("layer_types %v do not repeat with one period", h.LayerTypes)
			}
		}
	}
	return p, nil
}

// ConfigFromHF parses a config.json into a Config.
func ConfigFromHF(data []byte) (Config, error) {
	h, err := ParseHFConfig(data)
	if err != nil {
		return Config{}, err
	}
	return h.Config()
}
