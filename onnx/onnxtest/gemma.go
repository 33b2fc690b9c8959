package onnxtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
)

// GemmaOptions shapes the model WriteGemmaLike writes. Zero fields take the
// defaults noted, which keep Gemma 3 270M's signature (18 layers, one KV head
// of 256, four query heads) with a small vocabulary and hidden size so that
// tests run in milliseconds.
type GemmaOptions struct {
	Vocab   int    // logits width and tokenizer size; default 320, at least 289 (the real model: 262144)
	Layers  int    // default 18
	QHeads  int    // default 4
	KVHeads int    // default 1; must be 1 or QHeads
	HeadDim int    // default 256
	Hidden  int    // default 64
	FF      int    // default 128
	MaxPos  int    // RoPE table rows = context length; default 512
	Seed    uint64 // weights are N(0, 1/fan_in) from this seed
	// ExternalData, when set, stores the weights in this file next to
	// model.onnx ("model.onnx_data" in Hugging Face exports).
	ExternalData string
	// Float16KV makes the past/present tensors float16 (the graph attends
	// in float32 and casts at the boundary, as fp16 exports do).
	Float16KV bool
	// InputIDs renames the token input (default "input_ids"); tests use it
	// to make a model the runner must reject.
	InputIDs string
}

func (o *GemmaOptions) defaults() error {
	def := func(p *int, v int) {
		if *p == 0 {
			*p = v
		}
	}
	def(&o.Vocab, 320)
	def(&o.Layers, 18)
	def(&o.QHeads, 4)
	def(&o.KVHeads, 1)
	def(&o.HeadDim, 256)
	def(&o.Hidden, 64)
	def(&o.FF, 128)
	def(&o.MaxPos, 512)
	if o.InputIDs == "" {
		o.InputIDs = "input_ids"
	}
	switch {
	case o.Vocab < minVocab:
		return fmt.Errorf("onnxtest: vocab %d is below %d (specials, 256 byte tokens, ▁ and a-z)", o.Vocab, minVocab)
	case o.KVHeads != 1 && o.KVHeads != o.QHeads:
		return fmt.Errorf("onnxtest: %d KV heads for %d query heads: only 1 or equal is supported", o.KVHeads, o.QHeads)
	case o.HeadDim%2 != 0 || o.HeadDim <= 0:
		return fmt.Errorf("onnxtest: head dim %d must be even and positive", o.HeadDim)
	case o.Layers < 1 || o.QHeads < 1 || o.Hidden < 1 || o.FF < 1 || o.MaxPos < 1:
		return fmt.Errorf("onnxtest: layers, heads, hidden, ff and max positions must be positive")
	}
	return nil
}

// Token ids of the test tokenizer, laid out as in Gemma's vocabulary:
// specials first, then byte-fallback tokens, then pieces.
const (
	PadID, EOSID, BOSID, UnkID         = 0, 1, 2, 3
	StartOfTurnID, EndOfTurnID         = 4, 5
	firstByteID                        = 6
	firstPieceID                       = firstByteID + 256
	minVocab                           = firstPieceID + 1 + 26
	ropeTheta                          = 10000.0
	layerNormEps               float32 = 1e-5
)

// WriteGemmaLike writes into dir a decoder-only ONNX model with Gemma 3
// 270M's ONNX signature (inputs input_ids, attention_mask, position_ids
// int64 and past_key_values.N.key/value [batch, kv, past_seq, head_dim];
// outputs logits and present.N.key/value), plus config.json,
// generation_config.json, tokenizer.json and tokenizer_config.json in
// Hugging Face's Gemma form.
//
// Each layer really attends over concat(past, new) with NeoX RoPE taken from
// position_ids and a causal mask combined with attention_mask, so a wrong
// past, mask or position changes the logits. Weights are seeded random.
func WriteGemmaLike(dir string, o GemmaOptions) error {
	if err := o.defaults(); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("onnxtest: %w", err)
	}
	m := buildGemma(&o)
	if err := m.Write(filepath.Join(dir, "model.onnx"), o.ExternalData); err != nil {
		return err
	}
	return writeGemmaJSON(dir, &o)
}

type builder struct {
	g   *Graph
	n   int
	rng *rand.Rand
}

func (b *builder) name(prefix string) string {
	b.n++
	return fmt.Sprintf("%s_%d", prefix, b.n)
}

// op adds a node with one fresh output and returns that output's name.
func (b *builder) op(op string, in []string, attrs ...Attr) string {
	return b.opTo(b.name(op), op, in, attrs...)
}

func (b *builder) opTo(out, op string, in []string, attrs ...Attr) string {
	b.g.Nodes = append(b.g.Nodes, Node{Op: op, Name: "n_" + out, In: in, Out: []string{out}, Attrs: attrs})
	return out
}

func (b *builder) init(t *Tensor) string {
	b.g.Init = append(b.g.Init, t)
	return t.Name
}

func (b *builder) i64(vals ...int64) string {
	return b.init(&Tensor{Name: b.name("c"), Type: Int64, Dims: []int64{int64(len(vals))}, Int64: vals})
}

func (b *builder) scalarI64(v int64) string {
	return b.init(&Tensor{Name: b.name("s"), Type: Int64, Int64: []int64{v}})
}

func (b *builder) scalarF(v float32) string {
	return b.init(&Tensor{Name: b.name("f"), Type: Float, Float: []float32{v}})
}

func (b *builder) fill(name string, v float32, dims ...int64) string {
	n := 1
	for _, d := range dims {
		n *= int(d)
	}
	f := make([]float32, n)
	for i := range f {
		f[i] = v
	}
	return b.init(&Tensor{Name: name, Type: Float, Dims: dims, Float: f})
}

func (b *builder) randn(name string, std float64, dims ...int64) string {
	n := 1
	for _, d := range dims {
		n *= int(d)
	}
	f := make([]float32, n)
	for i := range f {
		f[i] = float32(b.rng.NormFloat64() * std)
	}
	return b.init(&Tensor{Name: name, Type: Float, Dims: dims, Float: f})
}

// signature declares the Gemma decoder's inputs (ids, attention_mask and
// position_ids int64, past_key_values.N.key/value [batch, kvHeads, past,
// headDim]) and outputs (logits [batch, seq, vocab], present.N.key/value).
func (b *builder) signature(ids string, layers int, kvHeads, headDim, vocab int64, kvType DataType) {
	g := b.g
	g.Inputs = append(g.Inputs,
		ValueInfo{ids, Int64, []Dim{P("batch_size"), P("sequence_length")}},
		ValueInfo{"attention_mask", Int64, []Dim{P("batch_size"), P("total_sequence_length")}},
		ValueInfo{"position_ids", Int64, []Dim{P("batch_size"), P("sequence_length")}},
	)
	g.Outputs = append(g.Outputs, ValueInfo{"logits", Float, []Dim{P("batch_size"), P("sequence_length"), N(vocab)}})
	for l := 0; l < layers; l++ {
		for _, kv := range []string{"key", "value"} {
			g.Inputs = append(g.Inputs, ValueInfo{fmt.Sprintf("past_key_values.%d.%s", l, kv), kvType,
				[]Dim{P("batch_size"), N(kvHeads), P("past_sequence_length"), N(headDim)}})
			g.Outputs = append(g.Outputs, ValueInfo{fmt.Sprintf("present.%d.%s", l, kv), kvType,
				[]Dim{P("batch_size"), N(kvHeads), P("total_sequence_length"), N(headDim)}})
		}
	}
}

// cachePositions gives the queries' cache positions qpos [seq, 1] (query
// i sits at past+i), the keys' kpos [1, total], and causal = kpos ≤ qpos.
func (b *builder) cachePositions(ids string) (qpos, kpos, causal string) {
	one, zero := b.scalarI64(1), b.scalarI64(0)
	seq := b.op("Gather", []string{b.op("Shape", []string{ids}), one}, AttrInt("axis", 0))
	total := b.op("Gather", []string{b.op("Shape", []string{"attention_mask"}), one}, AttrInt("axis", 0))
	past := b.op("Sub", []string{total, seq})
	qpos = b.op("Unsqueeze", []string{b.op("Range", []string{past, total, one}), b.i64(1)})
	kpos = b.op("Unsqueeze", []string{b.op("Range", []string{zero, total, one}), b.i64(0)})
	return qpos, kpos, b.op("LessOrEqual", []string{kpos, qpos})
}

func buildGemma(o *GemmaOptions) *Model {
	b := &builder{g: &Graph{Name: "gemma_like"}, rng: rand.New(rand.NewPCG(o.Seed, 0x9e3779b97f4a7c15))}
	D, hd, V := int64(o.Hidden), int64(o.HeadDim), int64(o.Vocab)
	QH, KVH := int64(o.QHeads), int64(o.KVHeads)
	kvType := Float
	if o.Float16KV {
		kvType = Float16
	}
	b.signature(o.InputIDs, o.Layers, KVH, hd, V, kvType)

	// Additive attention bias [batch, 1, seq, total]: query i sits at cache
	// index past+i and may see key j when j <= past+i and attention_mask[j].
	_, _, causal := b.cachePositions(o.InputIDs)
	pad := b.op("Unsqueeze", []string{b.op("Cast", []string{"attention_mask"}, AttrInt("to", int64(Bool))), b.i64(1, 2)})
	allowed := b.op("And", []string{causal, pad})
	bias := b.op("Where", []string{allowed, b.scalarF(0), b.scalarF(-1e9)})

	// NeoX RoPE: rot(x) = x·C + swap(x)·S with C = [cos, cos], S = [-sin, sin]
	// and swap exchanging the two halves, gathered per token by position_ids.
	cosT := make([]float32, o.MaxPos*o.HeadDim)
	sinT := make([]float32, o.MaxPos*o.HeadDim)
	half := o.HeadDim / 2
	for p := 0; p < o.MaxPos; p++ {
		for i := 0; i < half; i++ {
			ang := float64(p) / math.Pow(ropeTheta, float64(2*i)/float64(o.HeadDim))
			c, s := float32(math.Cos(ang)), float32(math.Sin(ang))
			row := p * o.HeadDim
			cosT[row+i], cosT[row+half+i] = c, c
			sinT[row+i], sinT[row+half+i] = -s, s
		}
	}
	b.init(&Tensor{Name: "rope_cos", Type: Float, Dims: []int64{int64(o.MaxPos), hd}, Float: cosT})
	b.init(&Tensor{Name: "rope_sin", Type: Float, Dims: []int64{int64(o.MaxPos), hd}, Float: sinT})
	ax1 := b.i64(1)
	cos := b.op("Unsqueeze", []string{b.op("Gather", []string{"rope_cos", "position_ids"}, AttrInt("axis", 0)), ax1})
	sin := b.op("Unsqueeze", []string{b.op("Gather", []string{"rope_sin", "position_ids"}, AttrInt("axis", 0)), ax1})
	hStart, hMid, hEnd, ax3 := b.i64(0), b.i64(hd/2), b.i64(hd), b.i64(3)
	rope := func(x string) string {
		lo := b.op("Slice", []string{x, hStart, hMid, ax3})
		hi := b.op("Slice", []string{x, hMid, hEnd, ax3})
		sw := b.op("Concat", []string{hi, lo}, AttrInt("axis", 3))
		return b.op("Add", []string{b.op("Mul", []string{x, cos}), b.op("Mul", []string{sw, sin})})
	}

	lnScale, lnBias := b.fill("ln_scale", 1, D), b.fill("ln_bias", 0, D)
	norm := func(x string) string {
		return b.op("LayerNormalization", []string{x, lnScale, lnBias}, AttrInt("axis", -1), AttrFloat("epsilon", layerNormEps))
	}
	heads := func(x string, n int64) string { // [b, s, n·hd] → [b, n, s, hd]
		r := b.op("Reshape", []string{x, b.i64(0, 0, n, hd)})
		return b.op("Transpose", []string{r}, AttrInts("perm", 0, 2, 1, 3))
	}
	scale := b.scalarF(float32(1 / math.Sqrt(float64(hd))))
	merge := b.i64(0, 0, QH*hd)

	x := b.op("Gather", []string{b.randn("embed_tokens", 1, V, D), o.InputIDs}, AttrInt("axis", 0))
	for l := 0; l < o.Layers; l++ {
		p := fmt.Sprintf("layers.%d.", l)
		h := norm(x)
		q := rope(heads(b.op("MatMul", []string{h, b.randn(p+"q_proj", 1/math.Sqrt(float64(D)), D, QH*hd)}), QH))
		k := rope(heads(b.op("MatMul", []string{h, b.randn(p+"k_proj", 1/math.Sqrt(float64(D)), D, KVH*hd)}), KVH))
		v := heads(b.op("MatMul", []string{h, b.randn(p+"v_proj", 1/math.Sqrt(float64(D)), D, KVH*hd)}), KVH)
		cat := func(kind, cur string) string {
			pastName := fmt.Sprintf("past_key_values.%d.%s", l, kind)
			presentName := fmt.Sprintf("present.%d.%s", l, kind)
			if !o.Float16KV {
				return b.opTo(presentName, "Concat", []string{pastName, cur}, AttrInt("axis", 2))
			}
			p32 := b.op("Cast", []string{pastName}, AttrInt("to", int64(Float)))
			full := b.op("Concat", []string{p32, cur}, AttrInt("axis", 2))
			b.opTo(presentName, "Cast", []string{full}, AttrInt("to", int64(Float16)))
			return full
		}
		kAll, vAll := cat("key", k), cat("value", v)
		kT := b.op("Transpose", []string{kAll}, AttrInts("perm", 0, 1, 3, 2))
		scores := b.op("Add", []string{b.op("Mul", []string{b.op("MatMul", []string{q, kT}), scale}), bias})
		probs := b.op("Softmax", []string{scores}, AttrInt("axis", -1))
		att := b.op("Transpose", []string{b.op("MatMul", []string{probs, vAll})}, AttrInts("perm", 0, 2, 1, 3))
		att = b.op("Reshape", []string{att, merge})
		x = b.op("Add", []string{x, b.op("MatMul", []string{att, b.randn(p+"o_proj", 1/math.Sqrt(float64(QH*hd)), QH*hd, D)})})
		f := b.op("MatMul", []string{norm(x), b.randn(p+"up_proj", 1/math.Sqrt(float64(D)), D, int64(o.FF))})
		act := b.op("Mul", []string{f, b.op("Sigmoid", []string{f})})
		x = b.op("Add", []string{x, b.op("MatMul", []string{act, b.randn(p+"down_proj", 1/math.Sqrt(float64(o.FF)), int64(o.FF), D)})})
	}
	// A wide LM head spreads the logits so greedy choices are clear-cut.
	b.opTo("logits", "MatMul", []string{norm(x), b.randn("lm_head", 3/math.Sqrt(float64(D)), D, V)})
	return &Model{Opset: 17, Graph: *b.g}
}

// testWords seed the BPE merges; their pieces fill the vocabulary after the
// bytes and letters, in this order, until Vocab is reached.
var testWords = []string{"the", "once", "upon", "a", "time", "there", "was", "little", "girl", "hello",
	"world", "and", "she", "he", "to", "play", "in", "park", "of", "is", "it", "with", "day", "sun"}

// gemmaVocab returns the token strings by id and the merges that build the
// pieces, SentencePiece-style: "▁" marks a word start, bytes fall back to
// <0xNN>.
func gemmaVocab(n int) ([]string, [][2]string) {
	toks := []string{"<pad>", "<eos>", "<bos>", "<unk>", "<start_of_turn>", "<end_of_turn>"}
	for i := 0; i < 256; i++ {
		toks = append(toks, fmt.Sprintf("<0x%02X>", i))
	}
	toks = append(toks, "▁")
	for c := 'a'; c <= 'z'; c++ {
		toks = append(toks, string(c))
	}
	have := map[string]bool{}
	for _, t := range toks {
		have[t] = true
	}
	var merges [][2]string
	for _, w := range testWords {
		cur := "▁"
		for _, c := range w {
			next := cur + string(c)
			if !have[next] {
				if len(toks) >= n {
					break
				}
				toks = append(toks, next)
				have[next] = true
				merges = append(merges, [2]string{cur, string(c)})
			}
			cur = next
		}
	}
	for i := 0; len(toks) < n; i++ {
		toks = append(toks, fmt.Sprintf("<unused%d>", i))
	}
	return toks, merges
}

func writeGemmaJSON(dir string, o *GemmaOptions) error {
	toks, merges := gemmaVocab(o.Vocab)
	vocab := make(map[string]int, len(toks))
	for i, t := range toks {
		vocab[t] = i
	}
	type added struct {
		ID         int    `json:"id"`
		Content    string `json:"content"`
		SingleWord bool   `json:"single_word"`
		LStrip     bool   `json:"lstrip"`
		RStrip     bool   `json:"rstrip"`
		Normalized bool   `json:"normalized"`
		Special    bool   `json:"special"`
	}
	var specials []added
	decoderMap := map[string]any{}
	for id := 0; id < firstByteID; id++ {
		specials = append(specials, added{ID: id, Content: toks[id], Special: true})
		decoderMap[fmt.Sprint(id)] = map[string]any{"content": toks[id], "lstrip": false, "normalized": false,
			"rstrip": false, "single_word": false, "special": true}
	}
	tokenizer := map[string]any{
		"version":       "1.0",
		"truncation":    nil,
		"padding":       nil,
		"added_tokens":  specials,
		"normalizer":    map[string]any{"type": "Replace", "pattern": map[string]any{"String": " "}, "content": "▁"},
		"pre_tokenizer": nil,
		"post_processor": map[string]any{
			"type":   "TemplateProcessing",
			"single": []any{map[string]any{"SpecialToken": map[string]any{"id": "<bos>", "type_id": 0}}, map[string]any{"Sequence": map[string]any{"id": "A", "type_id": 0}}},
			"pair": []any{map[string]any{"SpecialToken": map[string]any{"id": "<bos>", "type_id": 0}}, map[string]any{"Sequence": map[string]any{"id": "A", "type_id": 0}},
				map[string]any{"SpecialToken": map[string]any{"id": "<bos>", "type_id": 1}}, map[string]any{"Sequence": map[string]any{"id": "B", "type_id": 1}}},
			"special_tokens": map[string]any{"<bos>": map[string]any{"id": "<bos>", "ids": []int{BOSID}, "tokens": []string{"<bos>"}}},
		},
		"decoder": map[string]any{"type": "Sequence", "decoders": []any{
			map[string]any{"type": "Replace", "pattern": map[string]any{"String": "▁"}, "content": " "},
			map[string]any{"type": "ByteFallback"},
			map[string]any{"type": "Fuse"},
		}},
		"model": map[string]any{"type": "BPE", "dropout": nil, "unk_token": "<unk>", "continuing_subword_prefix": nil,
			"end_of_word_suffix": nil, "fuse_unk": true, "byte_fallback": true, "ignore_merges": false,
			"vocab": vocab, "merges": merges},
	}
	config := map[string]any{
		"architectures": []string{"Gemma3ForCausalLM"}, "model_type": "gemma3_text",
		"vocab_size": o.Vocab, "hidden_size": o.Hidden, "intermediate_size": o.FF,
		"num_hidden_layers": o.Layers, "num_attention_heads": o.QHeads, "num_key_value_heads": o.KVHeads,
		"head_dim": o.HeadDim, "max_position_embeddings": o.MaxPos, "rope_theta": ropeTheta,
		"query_pre_attn_scalar": o.HeadDim, "bos_token_id": BOSID, "eos_token_id": EOSID, "pad_token_id": PadID,
		"torch_dtype": "float32", "use_cache": true,
	}
	gen := map[string]any{"bos_token_id": BOSID, "eos_token_id": []int{EOSID, EndOfTurnID}, "pad_token_id": PadID}
	tokConfig := map[string]any{
		"add_bos_token": true, "add_eos_token": false, "bos_token": "<bos>", "eos_token": "<eos>",
		"pad_token": "<pad>", "unk_token": "<unk>", "model_max_length": o.MaxPos, "tokenizer_class": "GemmaTokenizer",
		"spaces_between_special_tokens": false, "added_tokens_decoder": decoderMap,
		"chat_template": "{{ bos_token }}{% for message in messages %}<start_of_turn>{{ 'model' if message['role'] == 'assistant' else message['role'] }}\n" +
			"{{ message['content'] | trim }}<end_of_turn>\n{% endfor %}{% if add_generation_prompt %}<start_of_turn>model\n{% endif %}",
	}
	for name, v := range map[string]any{"tokenizer.json": tokenizer, "config.json": config,
		"generation_config.json": gen, "tokenizer_config.json": tokConfig} {
		// SetEscapeHTML(false) keeps "<bos>" readable, as Hugging Face writes it.
		var data bytes.Buffer
		enc := json.NewEncoder(&data)
		enc.SetEscapeHTML(false)
		enc.SetIndent("", "  ")
		if err := enc.Encode(v); err != nil {
			return fmt.Errorf("onnxtest: %s: %w", name, err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), data.Bytes(), 0o644); err != nil {
			return fmt.Errorf("onnxtest: %w", err)
		}
	}
	return nil
}
