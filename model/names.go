package model

import (
	"strconv"
	"strings"
)

// hfNames is an architecture's mapping between Hugging Face tensor names
// and GGUF names (convert_hf_to_gguf.py's tensor map). Per-layer entries are
// the parts after the layer prefixes ("model.layers.N.", "blk.N.").
type hfNames struct {
	global, layer [][2]string
	layerPrefix   string
}

// hfLlama is Llama's table, which Qwen 2/3 and Phi-3 extend; Gemma renames
// the norms around the FFN.
var (
	hfLlamaGlobal = [][2]string{
		{"model.embed_tokens.weight", "token_embd.weight"},
		{"model.norm.weight", "output_norm.weight"},
		{"lm_head.weight", "output.weight"},
	}
	hfLlamaAttn = [][2]string{
		{"input_layernorm.weight", "attn_norm.weight"},
		{"self_attn.q_proj.weight", "attn_q.weight"},
		{"self_attn.k_proj.weight", "attn_k.weight"},
		{"self_attn.v_proj.weight", "attn_v.weight"},
		{"self_attn.o_proj.weight", "attn_output.weight"},
	}
	hfLlamaFFN = [][2]string{
		{"post_attention_layernorm.weight", "ffn_norm.weight"},
		{"mlp.gate_proj.weight", "ffn_gate.weight"},
		{"mlp.up_proj.weight", "ffn_up.weight"},
		{"mlp.down_proj.weight", "ffn_down.weight"},
	}
	hfBiases = [][2]string{
		{"self_attn.q_proj.bias", "attn_q.bias"},
		{"self_attn.k_proj.bias", "attn_k.bias"},
		{"self_attn.v_proj.bias", "attn_v.bias"},
	}
	hfQKNorms = [][2]string{
		{"self_attn.q_norm.weight", "attn_q_norm.weight"},
		{"self_attn.k_norm.weight", "attn_k_norm.weight"},
	}
	hfGemmaFFN = [][2]string{
		{"post_attention_layernorm.weight", "post_attention_norm.weight"},
		{"pre_feedforward_layernorm.weight", "ffn_norm.weight"},
		{"post_feedforward_layernorm.weight", "post_ffw_norm.weight"},
		{"mlp.gate_proj.weight", "ffn_gate.weight"},
		{"mlp.up_proj.weight", "ffn_up.weight"},
		{"mlp.down_proj.weight", "ffn_down.weight"},
	}
	hfPhi3 = [][2]string{
		{"input_layernorm.weight", "attn_norm.weight"},
		{"self_attn.qkv_proj.weight", "attn_qkv.weight"},
		{"self_attn.o_proj.weight", "attn_output.weight"},
		{"post_attention_layernorm.weight", "ffn_norm.weight"},
		{"mlp.gate_up_proj.weight", "ffn_up.weight"},
		{"mlp.down_proj.weight", "ffn_down.weight"},
	}
	// GPT-2's names carry a "transformer." prefix in most checkpoints
	// (GPT2LMHeadModel); the original gpt2 files leave it out, which the
	// Hugging Face loader (model/load) accepts too.
	hfGPT2Global = [][2]string{
		{"transformer.wte.weight", "token_embd.weight"},
		{"transformer.wpe.weight", "position_embd.weight"},
		{"transformer.ln_f.weight", "output_norm.weight"},
		{"transformer.ln_f.bias", "output_norm.bias"},
		{"lm_head.weight", "output.weight"},
	}
	hfGPT2Layer = [][2]string{
		{"ln_1.weight", "attn_norm.weight"},
		{"ln_1.bias", "attn_norm.bias"},
		{"attn.c_attn.weight", "attn_qkv.weight"},
		{"attn.c_attn.bias", "attn_qkv.bias"},
		{"attn.c_proj.weight", "attn_output.weight"},
		{"attn.c_proj.bias", "attn_output.bias"},
		{"ln_2.weight", "ffn_norm.weight"},
		{"ln_2.bias", "ffn_norm.bias"},
		{"mlp.c_fc.weight", "ffn_up.weight"},
		{"mlp.c_fc.bias", "ffn_up.bias"},
		{"mlp.c_proj.weight", "ffn_down.weight"},
		{"mlp.c_proj.bias", "ffn_down.bias"},
	}
)

// hfTables is each architecture's name table, the one place where Hugging
// Face names meet GGUF names.
var hfTables = map[string]hfNames{
	"llama":  {hfLlamaGlobal, join(hfLlamaAttn, hfLlamaFFN), "model.layers."},
	"qwen2":  {hfLlamaGlobal, join(hfLlamaAttn, hfBiases, hfLlamaFFN), "model.layers."},
	"qwen3":  {hfLlamaGlobal, join(hfLlamaAttn, hfQKNorms, hfLlamaFFN), "model.layers."},
	"phi3":   {hfLlamaGlobal, hfPhi3, "model.layers."},
	"gemma2": {hfLlamaGlobal, join(hfLlamaAttn, hfGemmaFFN), "model.layers."},
	"gemma3": {hfLlamaGlobal, join(hfLlamaAttn, hfQKNorms, hfGemmaFFN), "model.layers."},
	"gpt2":   {hfGPT2Global, hfGPT2Layer, "transformer.h."},
}

func join(ts ...[][2]string) [][2]string {
	var out [][2]string
	for _, t := range ts {
		out = append(out, t...)
	}
	return out
}

const ggufLayerPrefix = "blk."

// GGUFName returns the GGUF name of a Hugging Face tensor of architecture
// arch.
func GGUFName(arch, hf string) (string, bool) {
	t, ok := hfTables[arch]
	if !ok {
		return "", false
	}
	return t.mapName(hf, t.layerPrefix, ggufLayerPrefix, 0)
}

// HFName returns the Hugging Face name of a GGUF tensor of architecture
// arch.
func HFName(arch, gguf string) (string, bool) {
	t, ok := hfTables[arch]
	if !ok {
		return "", false
	}
	return t.mapName(gguf, ggufLayerPrefix, t.layerPrefix, 1)
}

// mapName translates name from column from to the other column of the
// tables, carrying the layer number across.
func (t hfNames) mapName(name, fromPrefix, toPrefix string, from int) (string, bool) {
	to := 1 - from
	for _, p := range t.global {
		if p[from] == name {
			return p[to], true
		}
	}
	rest, ok := strings.CutPrefix(name, fromPrefix)
	if !ok {
		return "", false
	}
	num, suffix, ok := strings.Cut(rest, ".")
	if !ok {
		return "", false
	}
	if n, err := strconv.Atoi(num); err != nil || n < 0 || strconv.Itoa(n) != num {
		return "", false
	}
	for _, p := range t.layer {
		if p[from] == suffix {
			return toPrefix + num + "." + p[to], true
		}
	}
	return "", false
}
