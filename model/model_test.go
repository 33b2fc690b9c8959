package model_test

import (
	"encoding/binary"
	"math"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/glint-llm/glint/dtype"
	"github.com/glint-llm/glint/internal/shared"
	"github.com/glint-llm/glint/model"
	"github.com/glint-llm/glint/model/gguf"
)

func TestNames(t *testing.T) {
	for _, tc := range []struct{ hf, gguf string }{
		{"model.embed_tokens.weight", "token_embd.weight"},
		{"model.norm.weight", "output_norm.weight"},
		{"lm_head.weight", "output.weight"},
		{"model.layers.0.input_layernorm.weight", "blk.0.attn_norm.weight"},
		{"model.layers.15.self_attn.q_proj.weight", "blk.15.attn_q.weight"},
		{"model.layers.3.self_attn.k_proj.weight", "blk.3.attn_k.weight"},
		{"model.layers.3.self_attn.v_proj.weight", "blk.3.attn_v.weight"},
		{"model.layers.3.self_attn.o_proj.weight", "blk.3.attn_output.weight"},
		{"model.layers.7.post_attention_layernorm.weight", "blk.7.ffn_norm.weight"},
		{"model.layers.7.mlp.gate_proj.weight", "blk.7.ffn_gate.weight"},
		{"model.layers.7.mlp.up_proj.weight", "blk.7.ffn_up.weight"},
		{"model.layers.120.mlp.down_proj.weight", "blk.120.ffn_down.weight"},
	} {
		if g, ok := model.GGUFName("llama", tc.hf); !ok || g != tc.gguf {
			t.Errorf("GGUFName(%q) = %q, %v; want %q", tc.hf, g, ok, tc.gguf)
		}
		if h, ok := model.HFName("llama", tc.gguf); !ok || h != tc.hf {
			t.Errorf("HFName(%q) = %q, %v; want %q", tc.gguf, h, ok, tc.hf)
		}
	}
	for _, bad := range []string{"", "model.layers.x.mlp.up_proj.weight", "model.layers.01.mlp.up_proj.weight",
		"model.layers.-1.mlp.up_proj.weight", "model.layers.0.self_attn.rotary_emb.inv_freq", "model.layers.0", "blk.0.attn_q.weight"} {
		if g, ok := model.GGUFName("llama", bad); ok {
			t.Errorf("GGUFName(%q) = %q, want no mapping", bad, g)
		}
	}
	if h, ok := model.HFName("llama", "rope_freqs.weight"); ok {
		t.Errorf("HFName(rope_freqs.weight) = %q, want none (HF derives it from config)", h)
	}
}

// rows builds an [n, 1] F32 tensor whose row r holds r.
func rows(n int) []byte {
	b := make([]byte, 4*n)
	for r := 0; r < n; r++ {
		binary.LittleEndian.PutUint32(b[4*r:], math.Float32bits(float32(r)))
	}
	return b
}

func rowOrder(b []byte) []int {
	out := make([]int, len(b)/4)
	for i := range out {
		out[i] = int(math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:])))
	}
	return out
}

func TestPermuteQK(t *testing.T) {
	// Expected orders worked out by hand from
	// w.reshape(n_head, 2, hd/2, in).swapaxes(1, 2).reshape(...).
	for _, tc := range []struct {
		rows, heads int
		want        []int
	}{
		{4, 1, []int{0, 2, 1, 3}},
		{12, 2, []int{0, 3, 1, 4, 2, 5, 6, 9, 7, 10, 8, 11}},
		{8, 1, []int{0, 4, 1, 5, 2, 6, 3, 7}},
	} {
		p, err := model.PermuteQK(rows(tc.rows), tc.rows, tc.heads)
		if err != nil {
			t.Fatal(err)
		}
		if got := rowOrder(p); !slices.Equal(got, tc.want) {
			t.Errorf("PermuteQK(%d rows, %d heads) order %v, want %v", tc.rows, tc.heads, got, tc.want)
		}
		u, err := model.UnpermuteQK(p, tc.rows, tc.heads)
		if err != nil {
			t.Fatal(err)
		}
		if got := rowOrder(u); !slices.Equal(got, rowOrder(rows(tc.rows))) {
			t.Errorf("UnpermuteQK did not invert: %v", got)
		}
	}
	for _, tc := range []struct{ n, rows, heads int }{{12, 3, 1}, {16, 4, 0}, {10, 4, 1}, {0, 0, 1}} {
		if _, err := model.PermuteQK(make([]byte, tc.n), tc.rows, tc.heads); err == nil {
			t.Errorf("PermuteQK(%d bytes, %d rows, %d heads) accepted", tc.n, tc.rows, tc.heads)
		}
	}
}

// TestPermuteQKRoPE checks what the permutation is for: rotating a head's
// Hugging Face query with NeoX pairs (i, i+d/2) and permuting gives the same
// vector as permuting first and rotating adjacent pairs (2i, 2i+1).
func TestPermuteQKRoPE(t *testing.T) {
	const hd, heads, pos = 8, 2, 5
	q := make([]float32, hd*heads)
	for i := range q {
		q[i] = float32(i*7%11) - 5
	}
	rot := func(x []float32, a, b, i int) {
		th := float64(pos) * math.Pow(10000, -2*float64(i)/hd)
		c, s := float32(math.Cos(th)), float32(math.Sin(th))
		x[a], x[b] = x[a]*c-x[b]*s, x[a]*s+x[b]*c
	}
	asRows := func(v []float32) []byte {
		b := make([]byte, 4*len(v))
		dtype.QuantizeRow(dtype.F32, b, v)
		return b
	}
	neox := slices.Clone(q)
	for h := 0; h < heads; h++ {
		for i := 0; i < hd/2; i++ {
			rot(neox, h*hd+i, h*hd+i+hd/2, i)
		}
	}
	want, _ := model.PermuteQK(asRows(neox), hd*heads, heads)
	pq, _ := model.PermuteQK(asRows(q), hd*heads, heads)
	adj := make([]float32, len(q))
	dtype.DequantizeRow(dtype.F32, adj, pq)
	for h := 0; h < heads; h++ {
		for i := 0; i < hd/2; i++ {
			rot(adj, h*hd+2*i, h*hd+2*i+1, i)
		}
	}
	if got := asRows(adj); !slices.Equal(got, want) {
		t.Errorf("adjacent RoPE of permuted q ≠ permuted NeoX RoPE of q")
	}
}

// TestLlama3RopeFreqs compares with the rope_freqs.weight that
// convert_hf_to_gguf.py's computation wrote into the staged files (head dims
// 16 and 64, theta 500000, Llama 3.2 scaling), and, for the staged Llama
// 3.2 1B config, with a float64 evaluation of the same formula.
func TestLlama3RopeFreqs(t *testing.T) {
	scaling := model.RopeScaling{Factor: 32, LowFreqFactor: 1, HighFreqFactor: 4, OriginalContext: 8192}
	for _, tc := range []struct {
		file string
		dims int
	}{
		{"llama3-tiny/llama3-tiny-F16.gguf", 16},
		{"llama3-small/llama3-small-Q4_0.gguf", 64},
	} {
		f, err := gguf.Open(shared.Models(t, tc.file))
		if err != nil {
			t.Fatal(err)
		}
		td, err := f.Tensor("rope_freqs.weight")
		if err != nil {
			t.Fatal(err)
		}
		want := make([]float32, tc.dims/2)
		dtype.DequantizeRow(td.Type, want, td.Data)
		f.Close()
		got := model.Llama3RopeFreqs(tc.dims, 500000, scaling)
		if !slices.Equal(got, want) {
			t.Errorf("%s: got %v, file has %v", tc.file, got, want)
		}
	}
	if got := model.Llama3RopeFreqs(16, 500000, scaling); math.Abs(float64(got[4])-3.292263) > 1e-6 || got[3] != 1 || got[5] != 32 {
		t.Errorf("head dim 16: %v", got)
	}

	cj, err := os.ReadFile(shared.Models(t, "llama3.2-1b-hf/config.json"))
	if err != nil {
		t.Fatal(err)
	}
	h, err := model.ParseHFConfig(cj)
	if err != nil {
		t.Fatal(err)
	}
	s, ok, err := h.Llama3Scaling()
	if err != nil || !ok || s != scaling {
		t.Fatalf("1B rope scaling %+v %v %v", s, ok, err)
	}
	got := model.Llama3RopeFreqs(*h.HeadDim, *h.RopeTheta, s)
	if len(got) != 32 {
		t.Fatalf("%d freqs", len(got))
	}
	for i, g := range got {
		freq := math.Pow(*h.RopeTheta, -float64(2*i)/64)
		wl := 2 * math.Pi / freq
		want := 1.0
		switch {
		case wl < 8192/4.0:
		case wl > 8192/1.0:
			want = 32
		default:
			sm := (8192/wl - 1) / 3
			want = 1 / ((1-sm)/32 + sm)
		}
		if math.Abs(float64(g)-want) > 1e-5*want {
			t.Errorf("1B freq %d = %v, float64 formula %v", i, g, want)
		}
	}
}

func TestConfigFromHF(t *testing.T) {
	cj, err := os.ReadFile(shared.Models(t, "llama3.2-1b-hf/config.json"))
	if err != nil {
		t.Fatal(err)
	}
	c, err := model.ConfigFromHF(cj)
	if err != nil {
		t.Fatal(err)
	}
	want := model.Config{Arch: "llama", NLayer: 16, NEmbd: 2048, NHead: 32, NHeadKV: 8, HeadDim: 64, NFF: 8192,
		Vocab: 128256, Context: 131072, RMSEps: 1e-5, RopeTheta: 500000, RopeDims: 64, RopeNeoX: true,
		HasRopeFreqs: true, TiedEmbeddings: true}
	if c != want {
		t.Errorf("got  %+v\nwant %+v", c, want)
	}
	gemma, err := os.ReadFile(shared.Models(t, "gemma-3-270m-it-hf/config.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, json, want string
	}{
		{"gemma 3 multimodal", `{"architectures":["Gemma3ForConditionalGeneration"],"model_type":"gemma3"}`, "Gemma3ForCausalLM"},
		{"mamba", `{"architectures":["MambaForCausalLM"],"model_type":"mamba"}`, "(supported: LlamaForCausalLM, Qwen2ForCausalLM,"},
		{"activation", `{"model_type":"llama","hidden_size":64,"num_hidden_layers":1,"num_attention_heads":4,"intermediate_size":8,"hidden_act":"relu"}`, `activation "relu" is not supported`},
		{"qwen2 yarn", `{"model_type":"qwen2","hidden_size":64,"num_hidden_layers":1,"num_attention_heads":4,"intermediate_size":8,"rope_scaling":{"type":"yarn","factor":4}}`, `rope_scaling "yarn" is not supported`},
		{"gemma 3 soft cap", `{"model_type":"gemma3_text","hidden_size":64,"num_hidden_layers":1,"num_attention_heads":4,"intermediate_size":8,"final_logit_softcapping":30}`, "soft-capping"},
		{"layer types", `{"model_type":"gemma3_text","hidden_size":64,"num_hidden_layers":3,"num_attention_heads":4,"intermediate_size":8,"layer_types":["sliding_attention","full_attention","full_attention"]}`, "one period"},
		{"not json", "{", "config.json"},
		{"yarn", `{"model_type":"llama","hidden_size":64,"num_hidden_layers":1,"num_attention_heads":4,"intermediate_size":8,"rope_scaling":{"rope_type":"yarn","factor":4}}`, `"yarn" is not supported`},
		{"gqa", `{"model_type":"llama","hidden_size":64,"num_hidden_layers":1,"num_attention_heads":4,"num_key_value_heads":3,"intermediate_size":8}`, "not a multiple of 3 KV heads"},
		{"no layers", `{"model_type":"llama","hidden_size":64,"num_attention_heads":4,"intermediate_size":8}`, "layers = 0"},
		{"bad llama3", `{"model_type":"llama","hidden_size":64,"num_hidden_layers":1,"num_attention_heads":4,"intermediate_size":8,"rope_scaling":{"rope_type":"llama3","factor":8,"low_freq_factor":4,"high_freq_factor":1}}`, "invalid llama3 rope_scaling"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := model.ConfigFromHF([]byte(tc.json))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to mention %q", err, tc.want)
			}
		})
	}
	// The real Gemma 3 270M: 5 sliding layers (window 512, base 10000) to
	// each global one (base 1e6), q scaled by 1/√256, embeddings by √640.
	c, err = model.ConfigFromHF(gemma)
	if err != nil {
		t.Fatal(err)
	}
	want = model.Config{Arch: "gemma3", NLayer: 18, NEmbd: 640, NHead: 4, NHeadKV: 1, HeadDim: 256, NFF: 2048,
		Vocab: 262144, Context: 32768, RMSEps: 1e-6, RopeTheta: 1e6, RopeDims: 256, RopeNeoX: true, TiedEmbeddings: true,
		QKNorm: true, PostNorms: true, GELU: true, EmbedScale: float32(math.Sqrt(640)), QueryScale: 1.0 / 16,
		SlidingWindow: 512, SWAPattern: 6, RopeThetaSWA: 10000}
	if c != want {
		t.Errorf("gemma 3 270M:\ngot  %+v\nwant %+v", c, want)
	}
	// Gemma 3 4B's linear scaling (factor 8) applies to its global layers.
	g4 := strings.Replace(string(gemma), `"rope_scaling": null`, `"rope_scaling": {"rope_type": "linear", "factor": 8.0}`, 1)
	c4, err := model.ConfigFromHF([]byte(g4))
	if err != nil {
		t.Fatal(err)
	}
	if c4.RopeFreqScale != 0.125 || c4.LayerRopeFreqScale(0) != 0 || c4.LayerRopeFreqScale(5) != 0.125 {
		t.Errorf("linear scaling: %g, layer 0 %g, layer 5 %g", c4.RopeFreqScale, c4.LayerRopeFreqScale(0), c4.LayerRopeFreqScale(5))
	}
	for il, global := range []bool{false, false, false, false, false, true, false, false, false, false, false, true} {
		if c.Sliding(il) == global || c.LayerRopeTheta(il) != map[bool]float32{true: 1e6, false: 1e4}[global] {
			t.Errorf("layer %d: sliding %v, theta %g; want global %v", il, c.Sliding(il), c.LayerRopeTheta(il), global)
		}
	}
	// Defaults: no head_dim, kv heads, theta, eps, context or vocab.
	c, err = model.ConfigFromHF([]byte(`{"architectures":["LlamaForCausalLM"],"hidden_size":64,"num_hidden_layers":2,"num_attention_heads":4,"intermediate_size":8}`))
	if err != nil {
		t.Fatal(err)
	}
	if c.HeadDim != 16 || c.NHeadKV != 4 || c.RopeTheta != 10000 || c.RMSEps != 1e-6 || c.Context != 2048 || c.Vocab != 32000 || c.HasRopeFreqs || c.TiedEmbeddings {
		t.Errorf("defaults: %+v", c)
	}
}

func TestValidate(t *testing.T) {
	good := model.Config{Arch: "llama", NLayer: 1, NEmbd: 8, NHead: 4, NHeadKV: 2, HeadDim: 2, NFF: 8, Vocab: 4, Context: 4, RMSEps: 1e-5, RopeTheta: 1e4, RopeDims: 2}
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		edit func(c *model.Config)
		want string
	}{
		{"gqa", func(c *model.Config) { c.NHeadKV = 3 }, "not a multiple"},
		{"odd rope", func(c *model.Config) { c.RopeDims = 1 }, "rope dims 1"},
		{"rope past head", func(c *model.Config) { c.RopeDims = 4 }, "rope dims 4"},
		{"zero vocab", func(c *model.Config) { c.Vocab = 0 }, "vocab = 0"},
		{"nan eps", func(c *model.Config) { c.RMSEps = float32(math.NaN()) }, "epsilon"},
		{"zero theta", func(c *model.Config) { c.RopeTheta = 0 }, "theta"},
		{"huge context", func(c *model.Config) { c.Context = model.MaxContext + 1 }, "context 16777217 is more than glint supports"},
	} {
		c := good
		tc.edit(&c)
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want it to mention %q", tc.name, err, tc.want)
		}
	}
}

// TestTensorCount: the count a hostile file's layer claim is checked
// against is the length of the list, for every architecture's flags.
func TestTensorCount(t *testing.T) {
	for _, arch := range model.Archs {
		for _, layers := range []int{0, 1, 3, 17} {
			c, err := model.Config{Arch: arch, NLayer: layers, NEmbd: 8, NHead: 2, NHeadKV: 1, HeadDim: 4, NFF: 8,
				Vocab: 4, Context: 4, RMSEps: 1e-5, RopeTheta: 1e4, RopeDims: 4, HasRopeFreqs: true}.WithArch()
			if err != nil {
				t.Fatal(err)
			}
			if got, want := c.TensorCount(), len(c.TensorShapes()); got != want {
				t.Errorf("%s, %d layers: TensorCount %d, %d shapes", arch, layers, got, want)
			}
		}
	}
}

// TestNamesPerArch: each architecture's Hugging Face names as
// convert_hf_to_gguf.py maps them (its TensorNameMap), and names an
// architecture lacks map to nothing.
func TestNamesPerArch(t *testing.T) {
	for _, tc := range []struct{ arch, hf, gguf string }{
		{"qwen2", "model.layers.2.self_attn.q_proj.bias", "blk.2.attn_q.bias"},
		{"qwen2", "model.layers.2.self_attn.v_proj.bias", "blk.2.attn_v.bias"},
		{"qwen3", "model.layers.1.self_attn.k_norm.weight", "blk.1.attn_k_norm.weight"},
		{"gemma2", "model.layers.0.post_attention_layernorm.weight", "blk.0.post_attention_norm.weight"},
		{"gemma2", "model.layers.0.pre_feedforward_layernorm.weight", "blk.0.ffn_norm.weight"},
		{"gemma3", "model.layers.5.post_feedforward_layernorm.weight", "blk.5.post_ffw_norm.weight"},
		{"gemma3", "model.layers.5.self_attn.q_norm.weight", "blk.5.attn_q_norm.weight"},
		{"gemma3", "lm_head.weight", "output.weight"},
		{"phi3", "model.layers.4.self_attn.qkv_proj.weight", "blk.4.attn_qkv.weight"},
		{"phi3", "model.layers.4.mlp.gate_up_proj.weight", "blk.4.ffn_up.weight"},
		{"gpt2", "transformer.wte.weight", "token_embd.weight"},
		{"gpt2", "transformer.wpe.weight", "position_embd.weight"},
		{"gpt2", "transformer.ln_f.bias", "output_norm.bias"},
		{"gpt2", "transformer.h.11.attn.c_attn.bias", "blk.11.attn_qkv.bias"},
		{"gpt2", "transformer.h.0.mlp.c_fc.weight", "blk.0.ffn_up.weight"},
		{"gpt2", "transformer.h.0.mlp.c_proj.bias", "blk.0.ffn_down.bias"},
	} {
		if g, ok := model.GGUFName(tc.arch, tc.hf); !ok || g != tc.gguf {
			t.Errorf("%s: GGUFName(%q) = %q, %v; want %q", tc.arch, tc.hf, g, ok, tc.gguf)
		}
		if h, ok := model.HFName(tc.arch, tc.gguf); !ok || h != tc.hf {
			t.Errorf("%s: HFName(%q) = %q, %v; want %q", tc.arch, tc.gguf, h, ok, tc.hf)
		}
	}
	for _, tc := range []struct{ arch, gguf string }{
		{"llama", "blk.0.attn_q.bias"}, {"llama", "blk.0.attn_qkv.weight"}, {"llama", "blk.0.post_ffw_norm.weight"},
		{"qwen2", "blk.0.attn_q_norm.weight"}, {"phi3", "blk.0.attn_q.weight"}, {"phi3", "blk.0.ffn_gate.weight"},
		{"gpt2", "blk.0.attn_q.weight"}, {"gpt2", "blk.0.ffn_gate.weight"}, {"mamba", "token_embd.weight"},
	} {
		if h, ok := model.HFName(tc.arch, tc.gguf); ok {
			t.Errorf("%s: HFName(%q) = %q, want none", tc.arch, tc.gguf, h)
		}
	}
}

// TestNamesRoundTrip: every tensor of every architecture's files that
// has a Hugging Face name comes back to itself, and only the tensors
// Hugging Face derives from config.json lack one.
func TestNamesRoundTrip(t *testing.T) {
	for _, arch := range model.Archs {
		c, err := model.Config{Arch: arch, NLayer: 12, NEmbd: 8, NHead: 2, NHeadKV: 1, HeadDim: 4, NFF: 8,
			Vocab: 4, Context: 4, RopeDims: 4, HasRopeFreqs: true}.WithArch()
		if err != nil {
			t.Fatal(err)
		}
		for _, ts := range c.TensorShapes() {
			h, ok := model.HFName(arch, ts.Name)
			if !ok {
				if ts.Name != "rope_freqs.weight" {
					t.Errorf("%s: %q has no Hugging Face name", arch, ts.Name)
				}
				continue
			}
			if g, ok := model.GGUFName(arch, h); !ok || g != ts.Name {
				t.Errorf("%s: %q → %q → %q, %v", arch, ts.Name, h, g, ok)
			}
		}
	}
}

// TestWeights: what the layers read is the file's tensors with fused
// matrices as their parts and Phi-3's LongRoPE factors, chosen by the
// context, in rope_freqs' place.
func TestWeights(t *testing.T) {
	c, err := model.Config{Arch: "phi3", NLayer: 1, NEmbd: 8, NHead: 2, NHeadKV: 2, HeadDim: 4, NFF: 12,
		Vocab: 4, Context: 64, RopeDims: 4, HasRopeFactors: true, RopeOrigContext: 16}.WithArch()
	if err != nil {
		t.Fatal(err)
	}
	type read struct {
		name     string
		shape    []int
		required bool
	}
	for _, tc := range []struct {
		ctx   int
		freqs string
	}{{16, "rope_factors_short.weight"}, {17, "rope_factors_long.weight"}} {
		got := map[string]read{}
		for _, w := range c.Weights(tc.ctx) {
			got[w.Key] = read{w.Name, w.Shape, w.Required}
		}
		for key, want := range map[string]read{
			"rope_freqs.weight":  {tc.freqs, []int{2}, true},
			"attn_q.weight":      {"blk.0.attn_q.weight", []int{8, 8}, true},
			"attn_v.weight":      {"blk.0.attn_v.weight", []int{8, 8}, true},
			"ffn_gate.weight":    {"blk.0.ffn_gate.weight", []int{12, 8}, true},
			"ffn_up.weight":      {"blk.0.ffn_up.weight", []int{12, 8}, true},
			"attn_q.bias":        {"blk.0.attn_q.bias", []int{8}, false},
			"attn_q_norm.weight": {"blk.0.attn_q_norm.weight", []int{4}, false},
			"output.weight":      {"output.weight", []int{4, 8}, true},
		} {
			if g := got[key]; g.name != want.name || !slices.Equal(g.shape, want.shape) || g.required != want.required {
				t.Errorf("ctx %d: %s reads %+v, want %+v", tc.ctx, key, g, want)
			}
		}
		for _, fused := range []string{"attn_qkv.weight", "rope_factors_long.weight", "rope_factors_short.weight"} {
			if g, ok := got[fused]; ok {
				t.Errorf("ctx %d: %s read directly (%+v)", tc.ctx, fused, g)
			}
		}
	}
}
