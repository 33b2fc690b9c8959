// Package tokenizer turns text into token ids and back for Llama-family
// models, reproducing llama.cpp (src/llama-vocab.cpp) id for id: the
// SentencePiece-style tokenizer of Llama 1/2 GGUF files ("llama"), the
// byte-level BPE of GPT-2 and Llama 3 ("gpt2"), and the SentencePiece-style
// BPE that Hugging Face tokenizer.json files describe (Gemma, Llama 2 HF).
//
// A Tokenizer is built from a Vocab (New), from GGUF metadata (FromGGUF) or
// from a Hugging Face folder (FromHF). It is immutable and safe for
// concurrent use.
package tokenizer

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Token types, as llama.cpp stores them in tokenizer.ggml.token_type.
const (
	TypeUndefined   int32 = 0
	TypeNormal      int32 = 1
	TypeUnknown     int32 = 2
	TypeControl     int32 = 3
	TypeUserDefined int32 = 4
	TypeUnused      int32 = 5
	TypeByte        int32 = 6
)

// Vocab is everything a tokenizer is made from, in GGUF's terms.
type Vocab struct {
	// Model is the algorithm: "llama" (SentencePiece: merges by token
	// score), "gpt2" (byte-level BPE: merges by rank), or "spm-bpe"
	// (SentencePiece-style BPE by merge rank over "▁"-escaped text with
	// byte fallback, as a Hugging Face tokenizer.json describes it).
	Model string
	// Pre names the pre-tokenizer of a "gpt2" vocabulary as llama.cpp does
	// ("llama-bpe", "gpt-2", "qwen2", …); "" and "default" mean GPT-2's.
	Pre    string
	Tokens []string
	// Scores are the SentencePiece piece scores ("llama" only; may be nil).
	Scores []float32
	// Types are llama.cpp token types (Type*); nil means all normal.
	Types []int32
	// Merges are "left right" pairs, highest priority first.
	Merges []string
	// Special token ids; -1 means none.
	BOS, EOS, EOT, UNK, PAD int32
	// EOG are more end-of-generation ids the file names (eom, fim pad,
	// repo and file separator), beyond EOS, EOT and those found by text.
	EOG            []int32
	AddBOS, AddEOS bool
	// AddSpacePrefix puts a space before the text (and after each special
	// token), as SentencePiece's add_dummy_prefix does.
	AddSpacePrefix bool
}

type algo int

const (
	algoSPM    algo = iota // score-driven merges (llama.cpp llm_tokenizer_spm)
	algoBPE                // byte-level rank-driven merges (llm_tokenizer_bpe)
	algoSPMBPE             // rank-driven merges over "▁"-escaped text, byte fallback
)

// prefixMode says where a "▁" goes before a text fragment (SPM, spm-bpe).
type prefixMode int

const (
	prefixNone  prefixMode = iota
	prefixEach             // every text fragment (llama.cpp; HF Prepend, Metaspace "always")
	prefixFirst            // only a fragment at the start of the text (Metaspace "first")
)

// Tokenizer encodes and decodes text for one vocabulary.
type Tokenizer struct {
	algo   algo
	pre    pretok
	tokens []string
	scores []float32
	types  []int32
	toID   map[string]int32
	// Merge ranks by the pair of token ids, and by text for the (malformed)
	// merges whose parts are not tokens.
	ranksByID   map[uint64]int32
	ranksByText map[[2]string]int32
	// special lists the tokens split out of text before tokenizing (control,
	// user-defined and unknown tokens), longest first as llama.cpp does.
	special []int32
	pieces  [][]byte
	// byteTok maps a byte to its <0xNN> token (SPM byte fallback), or -1.
	byteTok [256]int32

	bos, eos, eot, eom, unk, pad int32
	eog                          map[int32]bool
	fileEOG                      []int32 // Vocab.EOG
	addBOS, addEOS               bool

	// ignoreMerges: a whole pre-token that is in the vocabulary is emitted
	// as is (llama.cpp for Llama 3; HF "ignore_merges").
	ignoreMerges bool
	// The "▁" handling of SPM and spm-bpe text.
	prefix        prefixMode
	prefixIfSpace bool // HF Metaspace: no prefix when the text already starts with "▁"
	splitMeta     bool // HF Metaspace split: each "▁" starts a new word
	// byteLevelPrefix: HF ByteLevel add_prefix_space.
	byteLevelPrefix bool
	// byteFallback: spm-bpe spells unknown characters as <0xNN> tokens (when
	// the vocabulary has byte tokens); without it they become the unknown token.
	byteFallback bool
}

const spaceMark = "\u2581" // "▁", SentencePiece's escaped space

// eogTexts are the tokens llama.cpp treats as end of generation by their
// text (llama-vocab.cpp load: special_eog_ids), with the fill-in-the-middle
// pad, repo and file-separator tokens it finds by text and adds too. As
// there, <|end_of_text|> ends a generation only as the file's EOS.
var eogTexts = []string{"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|eom_id|>", "<EOT>",
	"<|fim_pad|>", "<fim-pad>", "<PAD>", "<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<|file_sep|>"}

// eotTexts are, in llama.cpp's order of preference, the texts it takes as
// the end-of-turn token when the file names none.
var eotTexts = []string{"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<EOT>", "<｜end▁of▁sentence｜>"}

// New builds a tokenizer from a vocabulary. It checks the vocabulary and
// reports the first inconsistency.
func New(v *Vocab) (*Tokenizer, error) {
	if v == nil {
		return nil, errors.New("tokenizer: nil vocab")
	}
	if v.Model == "llama" {
		return build(v, nil)
	}
	pairs := make([][2]string, len(v.Merges))
	for i, m := range v.Merges {
		// llama.cpp splits at the first space after the first byte, so a
		// merge whose left part starts with a space still parses.
		p := -1
		if len(m) > 1 {
			if j := strings.IndexByte(m[1:], ' '); j >= 0 {
				p = j + 1
			}
		}
		if p < 0 {
			return nil, fmt.Errorf("tokenizer: merge %d %q has no space separating its two parts", i, m)
		}
		pairs[i] = [2]string{m[:p], m[p+1:]}
	}
	return build(v, pairs)
}

// build makes the tokenizer from a vocabulary whose merges are already
// split into pairs.
func build(v *Vocab, pairs [][2]string) (*Tokenizer, error) {
	t := &Tokenizer{
		tokens: v.Tokens,
		bos:    v.BOS, eos: v.EOS, eot: v.EOT, eom: -1, unk: v.UNK, pad: v.PAD,
		addBOS: v.AddBOS, addEOS: v.AddEOS,
		fileEOG: v.EOG,
	}
	n := len(v.Tokens)
	if n == 0 {
		return nil, errors.New("tokenizer: empty vocabulary")
	}
	if n > 1<<31-1 {
		return nil, fmt.Errorf("tokenizer: vocabulary of %d tokens is too large", n)
	}
	if v.Scores != nil && len(v.Scores) != n {
		return nil, fmt.Errorf("tokenizer: %d scores for %d tokens", len(v.Scores), n)
	}
	if v.Types != nil && len(v.Types) != n {
		return nil, fmt.Errorf("tokenizer: %d token types for %d tokens", len(v.Types), n)
	}
	for _, s := range []struct {
		name string
		id   int32
	}{{"BOS", v.BOS}, {"EOS", v.EOS}, {"EOT", v.EOT}, {"UNK", v.UNK}, {"PAD", v.PAD}} {
		if s.id < -1 || int(s.id) >= n {
			return nil, fmt.Errorf("tokenizer: %s id %d out of range [0, %d)", s.name, s.id, n)
		}
	}
	for _, id := range v.EOG {
		if id < 0 || int(id) >= n {
			return nil, fmt.Errorf("tokenizer: end-of-generation id %d out of range [0, %d)", id, n)
		}
	}
	if v.AddBOS && v.BOS < 0 {
		return nil, errors.New("tokenizer: AddBOS set but there is no BOS token")
	}
	if v.AddEOS && v.EOS < 0 {
		return nil, errors.New("tokenizer: AddEOS set but there is no EOS token")
	}

	switch v.Model {
	case "llama":
		t.algo = algoSPM
		if v.AddSpacePrefix {
			t.prefix = prefixEach
		}
	case "gpt2":
		t.algo = algoBPE
		p, ok := pretokByName(v.Pre)
		if !ok {
			return nil, fmt.Errorf("tokenizer: unsupported pre-tokenizer %q", v.Pre)
		}
		t.pre = p
		t.ignoreMerges = p.ignoreMerges
	case "spm-bpe":
		t.algo = algoSPMBPE
		if v.AddSpacePrefix {
			t.prefix = prefixEach
		}
	default:
		return nil, fmt.Errorf("tokenizer: unsupported tokenizer model %q", v.Model)
	}

	t.scores = v.Scores
	if t.scores == nil {
		t.scores = make([]float32, n)
	}
	t.types = make([]int32, n)
	for i := range t.types {
		t.types[i] = TypeNormal
		if v.Types != nil {
			t.types[i] = v.Types[i]
		}
	}
	// llama.cpp renames empty tokens so that every text maps to one id; a
	// later duplicate wins, as in its token_to_id map.
	t.tokens = make([]string, n)
	t.toID = make(map[string]int32, n)
	for i, s := range v.Tokens {
		if s == "" {
			s = fmt.Sprintf("[EMPTY_%d]", i)
		}
		t.tokens[i] = s
		t.toID[s] = int32(i)
	}

	t.ranksByID = make(map[uint64]int32, len(pairs))
	for i, k := range pairs {
		ia, oka := t.toID[k[0]]
		ib, okb := t.toID[k[1]]
		if oka && okb {
			key := uint64(uint32(ia))<<32 | uint64(uint32(ib))
			if _, dup := t.ranksByID[key]; !dup {
				t.ranksByID[key] = int32(i)
			}
			continue
		}
		if t.ranksByText == nil {
			t.ranksByText = map[[2]string]int32{}
		}
		if _, dup := t.ranksByText[k]; !dup {
			t.ranksByText[k] = int32(i)
		}
	}

	t.findSpecial()
	if t.algo == algoSPMBPE {
		t.byteFallback = slices.Contains(t.types, TypeByte)
	}

	for b := range t.byteTok {
		t.byteTok[b] = -1
		if id, ok := t.toID[fmt.Sprintf("<0x%02X>", b)]; ok {
			t.byteTok[b] = id
		} else if id, ok := t.toID[string([]byte{byte(b)})]; ok {
			t.byteTok[b] = id
		}
	}

	t.pieces = make([][]byte, n)
	for i := range t.pieces {
		t.pieces[i] = t.piece(int32(i))
	}
	return t, nil
}

// findSpecial finds the end-of-turn and end-of-generation tokens by text as
// llama.cpp does, marks them control tokens, and lists the tokens that are
// split out of text.
func (t *Tokenizer) findSpecial() {
	if t.eot < 0 {
		for _, s := range eotTexts {
			if id, ok := t.toID[s]; ok {
				t.eot = id
				break
			}
		}
	}
	if id, ok := t.toID["<|eom_id|>"]; ok {
		t.eom = id
	}
	t.eog = map[int32]bool{}
	for _, s := range eogTexts {
		if id, ok := t.toID[s]; ok {
			t.eog[id] = true
		}
	}
	for _, id := range []int32{t.eos, t.eot, t.eom} {
		if id >= 0 {
			t.eog[id] = true
		}
	}
	for _, id := range t.fileEOG {
		t.eog[id] = true
	}
	for id := range t.eog {
		t.types[id] = TypeControl
	}
	for id, ty := range t.types {
		if ty == TypeControl || ty == TypeUserDefined || ty == TypeUnknown {
			t.special = append(t.special, int32(id))
		}
	}
	// Longest first; equal lengths by id so that the order is deterministic.
	slices.SortStableFunc(t.special, func(a, b int32) int {
		return cmp.Compare(len(t.tokens[b]), len(t.tokens[a]))
	})
}

// BOS is the beginning-of-sequence token, or -1.
func (t *Tokenizer) BOS() int32 { return t.bos }

// EOS is the end-of-sequence token, or -1.
func (t *Tokenizer) EOS() int32 { return t.eos }

// EOT is the end-of-turn token, or -1.
func (t *Tokenizer) EOT() int32 { return t.eot }

// AddBOS reports whether Encode with addSpecial prepends BOS.
func (t *Tokenizer) AddBOS() bool { return t.addBOS }

// VocabSize is the number of tokens.
func (t *Tokenizer) VocabSize() int { return len(t.tokens) }

// IsEOG reports whether generation stops at id: EOS, EOT, and the tokens
// llama.cpp recognises by text (<|eot_id|>, <|eom_id|>, <end_of_turn>, …).
func (t *Tokenizer) IsEOG(id int32) bool { return t.eog[id] }

// Token is the stored text of a token ("" when id is out of range).
func (t *Tokenizer) Token(id int32) string {
	if id < 0 || int(id) >= len(t.tokens) {
		return ""
	}
	return t.tokens[id]
}

// ID returns the token whose stored text is s.
func (t *Tokenizer) ID(s string) (int32, bool) {
	id, ok := t.toID[s]
	return id, ok
}

// SpecialTexts are the texts EncodeProtected leaves as text inside its
// literal ranges: those of the control and unknown tokens, which Encode
// splits out of any text (llama.cpp's parse_special), longest first.
// User-defined tokens are not among them: they are split out either way.
func (t *Tokenizer) SpecialTexts() []string {
	var out []string
	for _, id := range t.special {
		if t.types[id] != TypeUserDefined {
			out = append(out, t.tokens[id])
		}
	}
	return out
}

// Piece is the raw bytes one token stands for: "▁" becomes a space, <0xNN>
// byte tokens their byte, byte-level BPE characters their bytes. Control,
// unknown and unused tokens render as nothing, as llama.cpp renders them
// by default. The result must not be modified.
func (t *Tokenizer) Piece(id int32) []byte {
	if id < 0 || int(id) >= len(t.pieces) {
		return nil
	}
	return t.pieces[id]
}

// SpecialPiece is Piece, except that control and unknown tokens render as
// their text, as llama.cpp's token_to_piece with special=true does (its
// server's /detokenize and /tokenize with_pieces).
func (t *Tokenizer) SpecialPiece(id int32) []byte {
	if id < 0 || int(id) >= len(t.pieces) {
		return nil
	}
	if ty := t.types[id]; ty == TypeControl || ty == TypeUnknown {
		return []byte(t.tokens[id])
	}
	return t.pieces[id]
}

// piece follows llama.cpp's token_to_piece with special=false.
func (t *Tokenizer) piece(id int32) []byte {
	text := t.tokens[id]
	switch t.types[id] {
	case TypeUserDefined:
		return []byte(text)
	case TypeNormal:
		if t.algo == algoBPE {
			return byteLevelDecode(text)
		}
		return []byte(strings.ReplaceAll(text, spaceMark, " "))
	case TypeByte:
		if b, ok := parseByteToken(text); ok {
			return []byte{b}
		}
	}
	return nil
}

// parseByteToken reads "<0xNN>".
func parseByteToken(s string) (byte, bool) {
	if len(s) != 6 || s[:3] != "<0x" || s[5] != '>' {
		return 0, false
	}
	hi, ok1 := hexVal(s[3])
	lo, ok2 := hexVal(s[4])
	return hi<<4 | lo, ok1 && ok2
}

func hexVal(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// Decode concatenates the pieces of ids (out-of-range ids are skipped). The
// result may end inside a multi-byte character; StreamDecoder holds such
// bytes back.
func (t *Tokenizer) Decode(ids []int32) string {
	var b strings.Builder
	for _, id := range ids {
		b.Write(t.Piece(id))
	}
	return b.String()
}

// fragment is a piece of the input: raw text, or a special token found in it.
type fragment struct {
	text  string
	start int   // byte offset of text in the input
	token int32 // -1 for text
}

// partition splits text on the special tokens, longest first, the way
// llama.cpp's tokenizer_st_partition does with parse_special=true. A
// control or unknown token overlapping a literal range is not split out
// (there llama.cpp's parse_special=false); user-defined tokens are split
// out everywhere, as there.
func (t *Tokenizer) partition(text string, lit literalRanges) []fragment {
	frags := []fragment{{text: text, token: -1}}
	for _, id := range t.special {
		tok := t.tokens[id]
		protectable := len(lit) > 0 && t.types[id] != TypeUserDefined
		var out []fragment
		changed := false
		for _, f := range frags {
			if f.token >= 0 || !strings.Contains(f.text, tok) {
				out = append(out, f)
				continue
			}
			s, base := f.text, f.start
			done, from := 0, 0 // s[:done] is emitted; the search resumes at from
			for {
				j := strings.Index(s[from:], tok)
				if j < 0 {
					break
				}
				i := from + j
				if protectable && lit.overlaps(base+i, base+i+len(tok)) {
					from = i + 1
					continue
				}
				if i > done {
					out = append(out, fragment{text: s[done:i], start: base + done, token: -1})
				}
				out = append(out, fragment{start: base + i, token: id})
				done = i + len(tok)
				from = done
			}
			switch {
			case done == 0:
				out = append(out, f)
			case done < len(s):
				out = append(out, fragment{text: s[done:], start: base + done, token: -1})
			}
			changed = changed || done > 0
		}
		if changed {
			frags = out
		}
	}
	return frags
}

// literalRanges are sorted, disjoint, non-empty byte ranges [start, end).
type literalRanges [][2]int

// newLiteralRanges sorts and merges ranges, dropping empty ones.
func newLiteralRanges(ranges [][2]int) literalRanges {
	var lr literalRanges
	for _, r := range ranges {
		if r[0] < r[1] {
			lr = append(lr, r)
		}
	}
	if len(lr) < 2 {
		return lr
	}
	slices.SortFunc(lr, func(a, b [2]int) int { return cmp.Compare(a[0], b[0]) })
	out := lr[:1]
	for _, r := range lr[1:] {
		if last := &out[len(out)-1]; r[0] <= last[1] {
			last[1] = max(last[1], r[1])
		} else {
			out = append(out, r)
		}
	}
	return out
}

// overlaps reports whether [start, end) shares a byte with a range.
func (lr literalRanges) overlaps(start, end int) bool {
	// The first range ending after start is the only candidate.
	i, _ := slices.BinarySearchFunc(lr, start, func(r [2]int, s int) int { return cmp.Compare(r[1], s+1) })
	return i < len(lr) && lr[i][0] < end
}

// Encode tokenizes text. Special tokens written in the text (such as
// "<|eot_id|>" or "<s>") become their ids. With addSpecial, BOS is
// prepended when the vocabulary asks for it, and EOS appended likewise.
// Invalid UTF-8 in a byte-level vocabulary is read as U+FFFD.
func (t *Tokenizer) Encode(text string, addSpecial bool) []int32 {
	return t.EncodeProtected(text, addSpecial, nil)
}

// EncodeProtected is Encode, except that a control or unknown token whose
// text overlaps one of the literal byte ranges of text is tokenized as the
// text it is spelt with, together with its neighbours (as llama.cpp does
// with parse_special=false): a chat message's own words then cannot forge
// the template's control tokens. Ranges may overlap, be unsorted or reach
// past the text.
func (t *Tokenizer) EncodeProtected(text string, addSpecial bool, literal [][2]int) []int32 {
	var out []int32
	if addSpecial && t.addBOS {
		out = append(out, t.bos)
	}
	if text != "" {
		for _, f := range t.partition(text, newLiteralRanges(literal)) {
			if f.token >= 0 {
				out = append(out, f.token)
				continue
			}
			switch t.algo {
			case algoSPM:
				out = t.encodeSPM(t.escape(f), out)
			case algoSPMBPE:
				out = t.encodeSPMBPE(t.escape(f), out)
			case algoBPE:
				s := f.text
				if t.byteLevelPrefix && !strings.HasPrefix(s, " ") {
					s = " " + s
				}
				out = t.encodeBPE(s, out)
			}
		}
	}
	if addSpecial && t.addEOS {
		out = append(out, t.eos)
	}
	return out
}

// escape applies SentencePiece's space handling to a text fragment.
func (t *Tokenizer) escape(f fragment) string {
	s := strings.ReplaceAll(f.text, " ", spaceMark)
	add := t.prefix == prefixEach || (t.prefix == prefixFirst && f.start == 0)
	if add && !(t.prefixIfSpace && strings.HasPrefix(s, spaceMark)) {
		s = spaceMark + s
	}
	return s
}
