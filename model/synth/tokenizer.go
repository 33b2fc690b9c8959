package synth

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// corpus is the text the built-in tokenizer's merges are learned from.
const corpus = `Once upon a time, in a small town by the sea, there lived a girl named Mia.
She loved to walk along the beach in the morning and look for shells. One day she found
a big shell that was shining in the sun. "What a beautiful shell!" she said. She took it
home and showed it to her mother. Her mother smiled and said, "You can keep it in your room."
The next day, Mia went back to the beach with her friend Tom. They played in the sand and
built a castle with a tall tower. Then the water came and washed the castle away. Tom was
sad, but Mia said, "We can build another one tomorrow." They laughed and ran home together.
The capital of France is Paris. The capital of Italy is Rome. The capital of Germany is Berlin.
Water is made of hydrogen and oxygen. The sun is a star, and the earth goes around the sun
once every year. There are seven days in a week and twelve months in a year.
In the evening, the family sat at the table and talked about the day. The father told a story
about a dog that could not stop running, and everyone laughed. After dinner, Mia read a book
about the stars before she went to sleep. She dreamed of the sea, the shells and the castle.
The quick brown fox jumps over the lazy dog. 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 100, 2024.
func main() { fmt.Println("hello, world") } // code has its own words: if, for, return.
`

// Special tokens of the built-in vocabulary, named as in Llama 3.
var specialTokens = []string{"<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"}

// maxMerges bounds the learned merges: enough to make common words single
// tokens, few enough to keep the tiny shape's vocabulary small.
const maxMerges = 400

// token types, as llama.cpp's llama_token_type.
const (
	tokenNormal  = 1
	tokenControl = 3
)

// vocab is a byte-level BPE vocabulary in GGUF form.
type vocab struct {
	tokens []string
	types  []int32
	merges []string
	bos    uint32
	eos    uint32
	eot    uint32
}

// byteToUnicode is GPT-2's bytes_to_unicode: printable bytes map to
// themselves, the others to code points from 256 up, so every token is
// printable text. The order (printable bytes first) is the order of the
// first 256 token ids in GPT-2 and Llama 3 vocabularies.
func byteToUnicode() (order []byte, runes [256]rune) {
	var bs []int
	for b := '!'; b <= '~'; b++ {
		bs = append(bs, int(b))
	}
	for b := '¡'; b <= '¬'; b++ {
		bs = append(bs, int(b))
	}
	for b := '®'; b <= 'ÿ'; b++ {
		bs = append(bs, int(b))
	}
	cs := slices.Clone(bs)
	printable := len(bs)
	n := 0
	for b := 0; b < 256; b++ {
		if !slices.Contains(bs[:printable], b) {
			bs = append(bs, b)
			cs = append(cs, 256+n)
			n++
		}
	}
	for i, b := range bs {
		order = append(order, byte(b))
		runes[b] = rune(cs[i])
	}
	return order, runes
}

// pretokenize approximates Llama 3's pre-tokenizer (contractions, words
// with their leading space, digit runs, punctuation runs, whitespace); merges
// never cross these pieces.
var pretokenize = regexp.MustCompile(`'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+|\s+`)

// builtinVocab learns byte-level BPE merges from corpus and pads the
// vocabulary with reserved control tokens to size n.
func builtinVocab(n int) (*vocab, error) {
	need := 256 + len(specialTokens)
	if n < need {
		return nil, fmt.Errorf("synth: vocab size %d is too small for the built-in tokenizer (needs %d)", n, need)
	}
	order, runes := byteToUnicode()
	v := &vocab{}
	known := map[string]bool{}
	for _, b := range order {
		s := string(runes[b])
		v.tokens = append(v.tokens, s)
		v.types = append(v.types, tokenNormal)
		known[s] = true
	}
	// Word frequencies, with each word as a sequence of symbols.
	counts := map[string]int{}
	for _, w := range pretokenize.FindAllString(corpus, -1) {
		var sb strings.Builder
		for _, b := range []byte(w) {
			sb.WriteRune(runes[b])
		}
		counts[sb.String()]++
	}
	type word struct {
		syms  []string
		count int
	}
	var words []word
	for _, w := range slices.Sorted(maps.Keys(counts)) {
		var syms []string
		for _, r := range w {
			syms = append(syms, string(r))
		}
		words = append(words, word{syms, counts[w]})
	}
	budget := min(maxMerges, n-need)
	for len(v.merges) < budget {
		pairs := map[[2]string]int{}
		for _, w := range words {
			for i := 0; i+1 < len(w.syms); i++ {
				pairs[[2]string{w.syms[i], w.syms[i+1]}] += w.count
			}
		}
		var best [2]string
		bestN := 0
		for p, c := range pairs {
			if c > bestN || c == bestN && cmp.Or(cmp.Compare(p[0], best[0]), cmp.Compare(p[1], best[1])) < 0 {
				best, bestN = p, c
			}
		}
		if bestN < 2 {
			break
		}
		v.merges = append(v.merges, best[0]+" "+best[1])
		joined := best[0] + best[1]
		if !known[joined] {
			known[joined] = true
			v.tokens = append(v.tokens, joined)
			v.types = append(v.types, tokenNormal)
		}
		for wi := range words {
			s := words[wi].syms
			out := s[:0]
			for i := 0; i < len(s); i++ {
				if i+1 < len(s) && s[i] == best[0] && s[i+1] == best[1] {
					out = append(out, joined)
					i++
				} else {
					out = append(out, s[i])
				}
			}
			words[wi].syms = out
		}
	}
	for i, s := range specialTokens {
		id := uint32(len(v.tokens))
		switch i {
		case 0:
			v.bos = id
		case 1:
			v.eos = id
		case 4:
			v.eot = id
		}
		v.tokens = append(v.tokens, s)
		v.types = append(v.types, tokenControl)
	}
	for i := 0; len(v.tokens) < n; i++ {
		v.tokens = append(v.tokens, fmt.Sprintf("<|reserved_%d|>", i))
		v.types = append(v.types, tokenControl)
	}
	return v, nil
}

// llama3Regex is the Llama 3 pre-tokenizer's Split pattern as Hugging Face
// tokenizer.json files spell it.
const llama3Regex = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`

// writeHFTokenizer writes the built-in vocabulary as a Hugging Face
// tokenizer.json (byte-level BPE with Llama 3's pre-tokenizer, as Llama 3's
// own file has) and tokenizer_config.json, so that a folder from WriteHF
// tokenizes exactly like the GGUF file of the same options.
func writeHFTokenizer(dir string, v *vocab) error {
	ids := make(map[string]int, len(v.tokens))
	var added []map[string]any
	for i, t := range v.tokens {
		if v.types[i] == tokenControl {
			added = append(added, map[string]any{"id": i, "content": t, "single_word": false, "lstrip": false,
				"rstrip": false, "normalized": false, "special": true})
			continue
		}
		ids[t] = i
	}
	tj := map[string]any{
		"version":      "1.0",
		"added_tokens": added,
		"normalizer":   nil,
		"pre_tokenizer": map[string]any{"type": "Sequence", "pretokenizers": []any{
			map[string]any{"type": "Split", "pattern": map[string]any{"Regex": llama3Regex}, "behavior": "Isolated", "invert": false},
			map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": false},
		}},
		"decoder": map[string]any{"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true},
		"model": map[string]any{"type": "BPE", "dropout": nil, "unk_token": nil, "fuse_unk": false, "byte_fallback": false,
			"ignore_merges": true, "vocab": ids, "merges": v.merges},
	}
	cfg := map[string]any{
		"add_bos_token": true, "add_eos_token": false,
		"bos_token": v.tokens[v.bos], "eos_token": v.tokens[v.eos],
		"tokenizer_class": "PreTrainedTokenizerFast",
	}
	for name, obj := range map[string]any{"tokenizer.json": tj, "tokenizer_config.json": cfg} {
		b, err := json.MarshalIndent(obj, "", " ")
		if err != nil {
			return fmt.Errorf("synth: %s: %w", name, err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), append(b, '\n'), 0o644); err != nil {
			return fmt.Errorf("synth: %w", err)
		}
	}
	return nil
}
