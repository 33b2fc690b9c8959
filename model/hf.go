package model

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// HFConfig is the part of a Hugging Face config.json that describes a Llama
// model. Pointer fields are optional; Config applies transformers' defaults.
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
	TieWordEmbeddings bool            `json:"tie_word_embeddings"`
	RopeScaling       *HFRopeScaling  `json:"rope_scaling,omitempty"`
	BOSTokenID        json.RawMessage `json:"bos_token_id,omitempty"`
	EOSTokenID        json.RawMessage `json:"eos_token_id,omitempty"`
	TorchDType        string          `json:"torch_dtype,omitempty"`
}

// HFRopeScaling is config.json's rope_scaling object.
type HFRopeScaling struct {
	RopeType                      string  `json:"rope_type"`
	Type                          string  `json:"type,omitempty"` // older spelling of rope_type
	Factor                        float64 `json:"factor"`
	LowFreqFactor                 float64 `json:"low_freq_factor"`
	HighFreqFactor                float64 `json:"high_freq_factor"`
	OriginalMaxPositionEmbeddings int     `json:"original_max_position_embeddings"`
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
	if rs == nil {
		return RopeScaling{}, false, nil
	}
	typ := rs.RopeType
	if typ == "" {
		typ = rs.Type
	}
	switch strings.ToLower(typ) {
	case "llama3":
	case "default", "":
		return RopeScaling{}, false, nil
	default:
		return RopeScaling{}, false, fmt.Errorf("model: config.json: rope_scaling type %q is not supported (only llama3)", typ)
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

// Config converts to glint's Config, with transformers' LlamaConfig
// defaults for absent fields. Hugging Face checkpoints are not permuted, so
// RoPE rotates NeoX pairs. TiedEmbeddings follows tie_word_embeddings; a
// loader also sets it when lm_head.weight is absent.
func (h HFConfig) Config() (Config, error) {
	if !slices.Contains(h.Architectures, "LlamaForCausalLM") && h.ModelType != "llama" {
		return Config{}, fmt.Errorf("model: config.json: architecture %v (model_type %q) is not supported (only LlamaForCausalLM)", h.Architectures, h.ModelType)
	}
	c := Config{
		Arch:           "llama",
		NLayer:         h.NumHiddenLayers,
		NEmbd:          h.HiddenSize,
		NHead:          h.NumAttentionHeads,
		NHeadKV:        h.NumAttentionHeads,
		NFF:            h.IntermediateSize,
		Vocab:          32000,
		Context:        2048,
		RMSEps:         1e-6,
		RopeTheta:      10000,
		RopeNeoX:       true,
		TiedEmbeddings: h.TieWordEmbeddings,
	}
	if h.NumKeyValueHeads != nil {
		c.NHeadKV = *h.NumKeyValueHeads
	}
	if h.HeadDim != nil {
		c.HeadDim = *h.HeadDim
	} else if c.NHead > 0 {
		c.HeadDim = c.NEmbd / c.NHead
	}
	c.RopeDims = c.HeadDim
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
	_, scaled, err := h.Llama3Scaling()
	if err != nil {
		return Config{}, err
	}
	c.HasRopeFreqs = scaled
	if err := c.Validate(); err != nil {
		return Config{}, fmt.Errorf("config.json: %w", err)
	}
	return c, nil
}

// ConfigFromHF parses a config.json into a Config.
func ConfigFromHF(data []byte) (Config, error) {
	h, err := ParseHFConfig(data)
	if err != nil {
		return Config{}, err
	}
	return h.Config()
}
