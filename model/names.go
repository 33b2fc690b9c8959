package model

import (
	"strconv"
	"strings"
)

// hfNames is the one mapping between Hugging Face Llama tensor names and
// GGUF names (convert_hf_to_gguf.py's tensor map for LLAMA). Per-layer
// entries are the parts after "model.layers.N." and "blk.N.".
var (
	hfGlobal = [][2]string{
		{"model.embed_tokens.weight", "token_embd.weight"},
		{"model.norm.weight", "output_norm.weight"},
		{"lm_head.weight", "output.weight"},
	}
	hfLayer = [][2]string{
		{"input_layernorm.weight", "attn_norm.weight"},
		{"self_attn.q_proj.weight", "attn_q.weight"},
		{"self_attn.k_proj.weight", "attn_k.weight"},
		{"self_attn.v_proj.weight", "attn_v.weight"},
		{"self_attn.o_proj.weight", "attn_output.weight"},
		{"post_attention_layernorm.weight", "ffn_norm.weight"},
		{"mlp.gate_proj.weight", "ffn_gate.weight"},
		{"mlp.up_proj.weight", "ffn_up.weight"},
		{"mlp.down_proj.weight", "ffn_down.weight"},
	}
)

const (
	hfLayerPrefix   = "model.layers."
	ggufLayerPrefix = "blk."
)

// GGUFName returns the GGUF name of a Hugging Face Llama tensor.
func GGUFName(hf string) (string, bool) { return mapName(hf, hfLayerPrefix, ggufLayerPrefix, 0) }

// HFName returns the Hugging Face name of a GGUF Llama tensor.
func HFName(gguf string) (string, bool) { return mapName(gguf, ggufLayerPrefix, hfLayerPrefix, 1) }

// mapName translates name from column from to the other column of the
// tables, carrying the layer number across.
func mapName(name, fromPrefix, toPrefix string, from int) (string, bool) {
	to := 1 - from
	for _, p := range hfGlobal {
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
	for _, p := range hfLayer {
		if p[from] == suffix {
			return toPrefix + num + "." + p[to], true
		}
	}
	return "", false
}
