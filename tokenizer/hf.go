package tokenizer

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// The parts of a Hugging Face tokenizer.json that glint reads. Fields it
// does not know are ignored.
type hfFile struct {
	AddedTokens   []hfAddedToken  `json:"added_tokens"`
	Normalizer    *hfNormalizer   `json:"normalizer"`
	PreTokenizer  *hfPreTokenizer `json:"pre_tokenizer"`
	PostProcessor *hfPost         `json:"post_processor"`
	Decoder       *struct {
		Type string `json:"type"`
	} `json:"decoder"`
	Model *hfModel `json:"model"`
}

type hfAddedToken struct {
	ID      *int64 `json:"id"`
	Content string `json:"content"`
	Special bool   `json:"special"`
}

type hfPattern struct {
	String *string `json:"String"`
	Regex  *string `json:"Regex"`
}

type hfNormalizer struct {
	Type        string          `json:"type"`
	Normalizers []*hfNormalizer `json:"normalizers"`
	Prepend     string          `json:"prepend"`
	Pattern     *hfPattern      `json:"pattern"`
	Content     string          `json:"content"`
}

type hfPreTokenizer struct {
	Type           string            `json:"type"`
	PreTokenizers  []*hfPreTokenizer `json:"pretokenizers"`
	AddPrefixSpace *bool             `json:"add_prefix_space"`
	UseRegex       *bool             `json:"use_regex"`
	Pattern        *hfPattern        `json:"pattern"`
	Replacement    string            `json:"replacement"`
	PrependScheme  string            `json:"prepend_scheme"`
	Split          *bool             `json:"split"`
	// IndividualDigits: a Digits pre-tokenizer that isolates every digit.
	IndividualDigits *bool `json:"individual_digits"`
}

type hfPost struct {
	Type       string    `json:"type"`
	Processors []*hfPost `json:"processors"`
	Single     []struct {
		SpecialToken *struct {
			ID string `json:"id"`
		} `json:"SpecialToken"`
	} `json:"single"`
}

type hfModel struct {
	Type                    string          `json:"type"`
	Vocab                   json.RawMessage `json:"vocab"`
	Merges                  json.RawMessage `json:"merges"`
	ByteFallback            bool            `json:"byte_fallback"`
	UnkToken                *string         `json:"unk_token"`
	IgnoreMerges            bool            `json:"ignore_merges"`
	ContinuingSubwordPrefix *string         `json:"continuing_subword_prefix"`
	EndOfWordSuffix         *string         `json:"end_of_word_suffix"`
}

// hfConfig is what glint reads from tokenizer_config.json.
type hfConfig struct {
	AddBOS *bool           `json:"add_bos_token"`
	AddEOS *bool           `json:"add_eos_token"`
	BOS    json.RawMessage `json:"bos_token"`
	EOS    json.RawMessage `json:"eos_token"`
	UNK    json.RawMessage `json:"unk_token"`
	PAD    json.RawMessage `json:"pad_token"`
}

// hfGeneration is what glint reads from generation_config.json.
type hfGeneration struct {
	BOS json.RawMessage `json:"bos_token_id"`
	EOS json.RawMessage `json:"eos_token_id"`
}

// FromHF builds the tokenizer of a Hugging Face model folder from its
// tokenizer.json, with tokenizer_config.json (BOS/EOS and whether to add
// them) and generation_config.json (end-of-generation ids) when present.
// Byte-level BPE (GPT-2, Llama 3) and SentencePiece-style BPE (Llama 2,
// Gemma: "▁" spaces, byte fallback) are supported.
func FromHF(dir string) (*Tokenizer, error) {
	tj, err := os.ReadFile(filepath.Join(dir, "tokenizer.json"))
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	readOptional := func(name string) ([]byte, error) {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("tokenizer: %w", err)
		}
		return b, nil
	}
	cfg, err := readOptional("tokenizer_config.json")
	if err != nil {
		return nil, err
	}
	gen, err := readOptional("generation_config.json")
	if err != nil {
		return nil, err
	}
	t, err := fromHFJSON(tj, cfg, gen)
	if err != nil {
		return nil, fmt.Errorf("%w (in %s)", err, dir)
	}
	return t, nil
}

// fromHFJSON does FromHF's work on the files' contents (cfg and gen may
// be nil).
func fromHFJSON(tokJSON, cfgJSON, genJSON []byte) (*Tokenizer, error) {
	var f hfFile
	if err := json.Unmarshal(tokJSON, &f); err != nil {
		return nil, fmt.Errorf("tokenizer: tokenizer.json: %w", err)
	}
	m := f.Model
	switch {
	case m == nil:
		return nil, errors.New("tokenizer: tokenizer.json: no model")
	case m.Type == "":
		return nil, errors.New("tokenizer: tokenizer.json: model.type missing")
	case m.Type != "BPE":
		return nil, fmt.Errorf("tokenizer: tokenizer.json: model.type %q is not supported (only BPE)", m.Type)
	case m.ContinuingSubwordPrefix != nil && *m.ContinuingSubwordPrefix != "":
		return nil, fmt.Errorf("tokenizer: tokenizer.json: model.continuing_subword_prefix %q is not supported", *m.ContinuingSubwordPrefix)
	case m.EndOfWordSuffix != nil && *m.EndOfWordSuffix != "":
		return nil, fmt.Errorf("tokenizer: tokenizer.json: model.end_of_word_suffix %q is not supported", *m.EndOfWordSuffix)
	}
	var vocab map[string]int64
	if len(m.Vocab) > 0 {
		if err := json.Unmarshal(m.Vocab, &vocab); err != nil {
			return nil, fmt.Errorf("tokenizer: tokenizer.json: model.vocab: %w", err)
		}
	}
	if len(vocab) == 0 {
		return nil, errors.New("tokenizer: tokenizer.json: model.vocab missing or empty")
	}
	pairs, err := parseHFMerges(m.Merges)
	if err != nil {
		return nil, err
	}

	// Ids must be dense enough that the table cannot be made huge by one
	// stray id; holes are filled as convert_hf_to_gguf.py fills them.
	limit := int64(len(vocab) + len(f.AddedTokens))
	tokens := make([]string, limit)
	types := make([]int32, limit)
	n := int64(0)
	filled := make([]bool, limit)
	setTok := func(where, s string, id int64, ty int32, fromVocab bool) error {
		if id < 0 || id >= limit {
			return fmt.Errorf("tokenizer: tokenizer.json: %s %q has id %d outside [0, %d)", where, s, id, limit)
		}
		if fromVocab && filled[id] {
			return fmt.Errorf("tokenizer: tokenizer.json: model.vocab gives id %d to both %q and %q", id, tokens[id], s)
		}
		filled[id] = true
		tokens[id], types[id] = s, ty
		n = max(n, id+1)
		return nil
	}
	for s, id := range vocab {
		if err := setTok("model.vocab token", s, id, TypeNormal, true); err != nil {
			return nil, err
		}
	}
	for i, a := range f.AddedTokens {
		if a.ID == nil {
			return nil, fmt.Errorf("tokenizer: tokenizer.json: added_tokens[%d] %q has no id", i, a.Content)
		}
		if a.Content == "" {
			return nil, fmt.Errorf("tokenizer: tokenizer.json: added_tokens[%d] has no content", i)
		}
		ty := TypeUserDefined
		if a.Special {
			ty = TypeControl
		}
		if err := setTok("added token", a.Content, *a.ID, ty, false); err != nil {
			return nil, err
		}
	}
	tokens, types = tokens[:n], types[:n]
	for i := range tokens {
		if !filled[i] {
			tokens[i], types[i] = fmt.Sprintf("[PAD%d]", i), TypeUnused
		}
	}

	v := &Vocab{Tokens: tokens, Types: types, BOS: -1, EOS: -1, EOT: -1, UNK: -1, PAD: -1}
	index := map[string]int32{}
	for i, s := range tokens {
		index[s] = int32(i)
	}
	if m.UnkToken != nil {
		if id, ok := index[*m.UnkToken]; ok {
			v.UNK = id
			types[id] = TypeUnknown
		}
	}

	sp, err := hfShape(&f)
	if err != nil {
		return nil, err
	}
	if sp.byteLevel {
		v.Model, v.Pre = "gpt2", sp.pre.name
	} else {
		v.Model = "spm-bpe"
		if m.ByteFallback {
			for i, s := range tokens {
				if _, ok := parseByteToken(s); ok && types[i] == TypeNormal {
					types[i] = TypeByte
				}
			}
		}
	}

	if err := hfSpecials(v, &f, index, cfgJSON); err != nil {
		return nil, err
	}
	extraEOG, err := hfGenerationEOS(v, index, genJSON)
	if err != nil {
		return nil, err
	}

	t, err := build(v, pairs)
	if err != nil {
		return nil, err
	}
	t.ignoreMerges = m.IgnoreMerges
	if sp.byteLevel {
		t.pre = sp.pre
		t.byteLevelPrefix = sp.byteLevelPrefix
	} else {
		t.prefix, t.prefixIfSpace, t.splitMeta = sp.prefix, sp.prefixIfSpace, sp.splitMeta
	}
	for _, id := range extraEOG {
		t.eog[id] = true
	}
	return t, nil
}

// parseHFMerges accepts both spellings: ["a b", …] and [["a", "b"], …].
func parseHFMerges(raw json.RawMessage) ([][2]string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var strs []string
	if err := json.Unmarshal(raw, &strs); err == nil {
		pairs := make([][2]string, len(strs))
		for i, s := range strs {
			p := -1
			if len(s) > 1 {
				for j := 1; j < len(s); j++ {
					if s[j] == ' ' {
						p = j
						break
					}
				}
			}
			if p < 0 {
				return nil, fmt.Errorf("tokenizer: tokenizer.json: model.merges[%d] %q is not two space-separated parts", i, s)
			}
			pairs[i] = [2]string{s[:p], s[p+1:]}
		}
		return pairs, nil
	}
	var lists [][]string
	if err := json.Unmarshal(raw, &lists); err != nil {
		return nil, fmt.Errorf("tokenizer: tokenizer.json: model.merges is neither [\"a b\", …] nor [[\"a\", \"b\"], …]: %w", err)
	}
	pairs := make([][2]string, len(lists))
	for i, l := range lists {
		if len(l) != 2 {
			return nil, fmt.Errorf("tokenizer: tokenizer.json: model.merges[%d] has %d parts, want 2", i, len(l))
		}
		pairs[i] = [2]string{l[0], l[1]}
	}
	return pairs, nil
}

// hfTextShape is how a tokenizer.json prepares text for its BPE model.
type hfTextShape struct {
	byteLevel       bool
	pre             pretok
	byteLevelPrefix bool

	prefix        prefixMode
	prefixIfSpace bool
	splitMeta     bool
}

// hfShape reads the normalizer and pre-tokenizer into the few
// arrangements real files use, and rejects the rest.
func hfShape(f *hfFile) (hfTextShape, error) {
	var sp hfTextShape
	var pres []*hfPreTokenizer
	if p := f.PreTokenizer; p != nil {
		if p.Type == "Sequence" {
			pres = p.PreTokenizers
		} else {
			pres = []*hfPreTokenizer{p}
		}
	}
	var split *pretok
	var byteLevel, metaspace *hfPreTokenizer
	// digits: a Digits(individual_digits) pre-tokenizer before ByteLevel, as
	// SmolLM's files have it: llama.cpp's "smollm" pre-tokenizer.
	digits := false
	for i, p := range pres {
		if p == nil {
			return sp, fmt.Errorf("tokenizer: tokenizer.json: pre_tokenizer %d is null", i)
		}
		switch p.Type {
		case "ByteLevel":
			byteLevel = p
		case "Metaspace":
			metaspace = p
		case "Digits":
			if p.IndividualDigits == nil || !*p.IndividualDigits || byteLevel != nil || split != nil {
				return sp, errors.New("tokenizer: tokenizer.json: only a Digits pre-tokenizer with individual_digits, before ByteLevel, is supported")
			}
			digits = true
		case "Split":
			if p.Pattern == nil || p.Pattern.Regex == nil {
				return sp, errors.New("tokenizer: tokenizer.json: Split pre-tokenizer without a Regex pattern is not supported")
			}
			var s pretok
			switch *p.Pattern.Regex {
			case regexGPT2:
				s = pretokGPT2
			case regexLlama3:
				s = pretokLlama3
			case regexQwen2:
				s = pretokQwen2
			default:
				return sp, fmt.Errorf("tokenizer: tokenizer.json: Split pre-tokenizer regex %q is not supported", *p.Pattern.Regex)
			}
			split = &s
		default:
			return sp, fmt.Errorf("tokenizer: tokenizer.json: pre-tokenizer %q is not supported", p.Type)
		}
	}
	if digits && (byteLevel == nil || split != nil) {
		return sp, errors.New("tokenizer: tokenizer.json: a Digits pre-tokenizer is supported only before a ByteLevel one, with no Split")
	}
	decoderByteLevel := f.Decoder != nil && f.Decoder.Type == "ByteLevel"

	if byteLevel != nil || decoderByteLevel {
		if metaspace != nil {
			return sp, errors.New("tokenizer: tokenizer.json: both ByteLevel and Metaspace pre-tokenizers")
		}
		if n := f.Normalizer; n != nil && n.Type != "NFC" {
			return sp, fmt.Errorf("tokenizer: tokenizer.json: normalizer %q with a byte-level model is not supported", n.Type)
		}
		sp.byteLevel = true
		useRegex := byteLevel != nil && (byteLevel.UseRegex == nil || *byteLevel.UseRegex)
		switch {
		case split != nil && useRegex:
			return sp, errors.New("tokenizer: tokenizer.json: Split followed by a regex ByteLevel pre-tokenizer is not supported")
		case digits && !useRegex:
			return sp, errors.New("tokenizer: tokenizer.json: Digits with a ByteLevel pre-tokenizer that does not split words is not supported")
		case split != nil:
			sp.pre = *split
		case digits:
			sp.pre = pretok{name: "smollm", stages: stagesSmolLM}
		case useRegex:
			sp.pre = pretokGPT2
		default:
			return sp, errors.New("tokenizer: tokenizer.json: byte-level model without a word-splitting pre-tokenizer is not supported")
		}
		sp.pre.ignoreMerges = false // the model's ignore_merges decides
		sp.byteLevelPrefix = byteLevel != nil && byteLevel.AddPrefixSpace != nil && *byteLevel.AddPrefixSpace
		return sp, nil
	}

	if split != nil {
		return sp, errors.New("tokenizer: tokenizer.json: Split pre-tokenizer without ByteLevel is not supported")
	}
	escapes := false
	var walk func(n *hfNormalizer) error
	walk = func(n *hfNormalizer) error {
		if n == nil {
			return nil
		}
		switch n.Type {
		case "Sequence":
			for _, c := range n.Normalizers {
				if err := walk(c); err != nil {
					return err
				}
			}
		case "Prepend":
			if n.Prepend != spaceMark {
				return fmt.Errorf("tokenizer: tokenizer.json: Prepend normalizer of %q is not supported", n.Prepend)
			}
			sp.prefix = prefixEach
		case "Replace":
			if n.Pattern == nil || n.Pattern.String == nil || *n.Pattern.String != " " || n.Content != spaceMark {
				return errors.New("tokenizer: tokenizer.json: only the Replace(\" \", \"▁\") normalizer is supported")
			}
			escapes = true
		case "NFC":
			// Text is taken to be NFC already; nothing to do.
		default:
			return fmt.Errorf("tokenizer: tokenizer.json: normalizer %q is not supported", n.Type)
		}
		return nil
	}
	if err := walk(f.Normalizer); err != nil {
		return sp, err
	}
	if metaspace != nil {
		if metaspace.Replacement != "" && metaspace.Replacement != spaceMark {
			return sp, fmt.Errorf("tokenizer: tokenizer.json: Metaspace replacement %q is not supported", metaspace.Replacement)
		}
		escapes = true
		scheme := metaspace.PrependScheme
		if scheme == "" {
			scheme = "always"
			if metaspace.AddPrefixSpace != nil && !*metaspace.AddPrefixSpace {
				scheme = "never"
			}
		}
		switch scheme {
		case "always":
			sp.prefix, sp.prefixIfSpace = prefixEach, true
		case "first":
			sp.prefix, sp.prefixIfSpace = prefixFirst, true
		case "never":
		default:
			return sp, fmt.Errorf("tokenizer: tokenizer.json: Metaspace prepend_scheme %q is not supported", scheme)
		}
		sp.splitMeta = metaspace.Split == nil || *metaspace.Split
	}
	if !escapes {
		return sp, errors.New("tokenizer: tokenizer.json: neither byte-level nor SentencePiece-style (no ByteLevel, Metaspace or Replace(\" \", \"▁\"))")
	}
	return sp, nil
}

// tokenName reads a special token given as "text" or {"content": "text"}.
func tokenName(raw json.RawMessage) (string, bool) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", false
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, s != ""
	}
	var o struct {
		Content string `json:"content"`
	}
	if json.Unmarshal(raw, &o) == nil {
		return o.Content, o.Content != ""
	}
	return "", false
}

// hfSpecials sets BOS/EOS/UNK/PAD and whether to add BOS/EOS, from
// tokenizer_config.json, falling back to the post-processor's template.
func hfSpecials(v *Vocab, f *hfFile, index map[string]int32, cfgJSON []byte) error {
	// A TemplateProcessing "single" template says which specials frame a
	// sequence: a leading one is BOS, a trailing one EOS.
	var tmpl *hfPost
	for stack := []*hfPost{f.PostProcessor}; len(stack) > 0; {
		p := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if p == nil {
			continue
		}
		if p.Type == "TemplateProcessing" {
			tmpl = p
			break
		}
		stack = append(stack, p.Processors...)
	}
	if tmpl != nil && len(tmpl.Single) > 0 {
		if st := tmpl.Single[0].SpecialToken; st != nil {
			if id, ok := index[st.ID]; ok {
				v.BOS, v.AddBOS = id, true
			}
		}
		if st := tmpl.Single[len(tmpl.Single)-1].SpecialToken; len(tmpl.Single) > 1 && st != nil {
			if id, ok := index[st.ID]; ok {
				v.EOS, v.AddEOS = id, true
			}
		}
	}
	if cfgJSON == nil {
		return nil
	}
	var c hfConfig
	if err := json.Unmarshal(cfgJSON, &c); err != nil {
		return fmt.Errorf("tokenizer: tokenizer_config.json: %w", err)
	}
	for _, s := range []struct {
		name string
		raw  json.RawMessage
		dst  *int32
	}{{"bos_token", c.BOS, &v.BOS}, {"eos_token", c.EOS, &v.EOS}, {"unk_token", c.UNK, &v.UNK}, {"pad_token", c.PAD, &v.PAD}} {
		name, ok := tokenName(s.raw)
		if !ok {
			continue
		}
		id, ok := index[name]
		if !ok {
			return fmt.Errorf("tokenizer: tokenizer_config.json: %s %q is not in the vocabulary", s.name, name)
		}
		*s.dst = id
	}
	if c.AddBOS != nil {
		v.AddBOS = *c.AddBOS
	}
	if c.AddEOS != nil {
		v.AddEOS = *c.AddEOS
	}
	if v.AddBOS && v.BOS < 0 {
		return errors.New("tokenizer: tokenizer_config.json: add_bos_token without a BOS token")
	}
	if v.AddEOS && v.EOS < 0 {
		return errors.New("tokenizer: tokenizer_config.json: add_eos_token without an EOS token")
	}
	return nil
}

// hfGenerationEOS reads generation_config.json's eos_token_id (one id or a
// list): every one ends generation, and the first is EOS if none is known.
func hfGenerationEOS(v *Vocab, index map[string]int32, genJSON []byte) ([]int32, error) {
	if genJSON == nil {
		return nil, nil
	}
	var g hfGeneration
	if err := json.Unmarshal(genJSON, &g); err != nil {
		return nil, fmt.Errorf("tokenizer: generation_config.json: %w", err)
	}
	ids, err := idList(g.EOS)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: generation_config.json: eos_token_id: %w", err)
	}
	for _, id := range ids {
		if id < 0 || id >= int64(len(v.Tokens)) {
			return nil, fmt.Errorf("tokenizer: generation_config.json: eos_token_id %d outside the vocabulary of %d", id, len(v.Tokens))
		}
	}
	if v.EOS < 0 && len(ids) > 0 {
		v.EOS = int32(ids[0])
	}
	bos, err := idList(g.BOS)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: generation_config.json: bos_token_id: %w", err)
	}
	if v.BOS < 0 && len(bos) == 1 && bos[0] >= 0 && bos[0] < int64(len(v.Tokens)) {
		v.BOS = int32(bos[0])
	}
	out := make([]int32, len(ids))
	for i, id := range ids {
		out[i] = int32(id)
	}
	return out, nil
}

// idList reads null, one integer, or a list of integers.
func idList(raw json.RawMessage) ([]int64, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var one int64
	if err := json.Unmarshal(raw, &one); err == nil {
		return []int64{one}, nil
	}
	var many []int64
	if err := json.Unmarshal(raw, &many); err != nil {
		return nil, err
	}
	return many, nil
}
