package tokenizer

import "unicode"

// pretok is a byte-level pre-tokenizer: it cuts text into words that BPE
// merges never cross. Go's regexp has no lookahead, so the regular
// expressions are hand-written scanners, transcribed from llama.cpp's
// unicode_regex_split_custom_gpt2 and _llama3 (src/unicode.cpp).
type pretok struct {
	name string
	// llama3 selects the Llama 3 expression; otherwise GPT-2's.
	llama3 bool
	// maxDigits is the longest run of digits in one word (\p{N}{1,3} for
	// Llama 3, \p{N} for Qwen 2).
	maxDigits    int
	ignoreMerges bool
	// stages, when set, replace the scanners: llama.cpp's sequence of
	// regular expressions (pretok_regex.go).
	stages []stage
}

// The regular expressions the scanners implement, as tokenizer.json files
// spell them (used to recognise a Split pre-tokenizer).
const (
	regexGPT2   = `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`
	regexLlama3 = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	regexQwen2  = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
)

var (
	pretokGPT2   = pretok{name: "gpt-2"}
	pretokLlama3 = pretok{name: "llama3", llama3: true, maxDigits: 3, ignoreMerges: true}
	pretokQwen2  = pretok{name: "qwen2", llama3: true, maxDigits: 1}
)

// pretokByName maps llama.cpp's tokenizer.ggml.pre values to a scanner.
// "default" would select llama.cpp's generic fallback expressions; for a
// GPT-2 style vocabulary GPT-2's expression is what users expect.
func pretokByName(pre string) (pretok, bool) {
	switch pre {
	case "", "default", "gpt-2", "phi-2", "roberta-bpe", "mpt", "olmo", "jais",
		"jina-es", "jina-de", "gigachat", "jina-v1-en", "jina-v2-es", "jina-v2-de", "jina-v2-code":
		return pretokGPT2, true
	case "llama3", "llama-v3", "llama-bpe", "falcon3":
		return pretokLlama3, true
	case "dbrx", "smaug-bpe":
		p := pretokLlama3
		p.name, p.ignoreMerges = pre, false
		return p, true
	case "qwen2", "deepseek-r1-qwen", "stablelm2", "megrez":
		return pretokQwen2, true
	case "smollm", "starcoder", "refact", "command-r", "codeshell", "exaone", "minerva-7b":
		return pretok{name: pre, stages: stagesSmolLM}, true
	case "deepseek-llm":
		return pretok{name: pre, stages: stagesDeepSeekLLM}, true
	case "deepseek-v3":
		return pretok{name: pre, stages: stagesDeepSeekV3}, true
	}
	return pretok{}, false
}

// split returns the words of runes as [start, end) rune offsets.
func (p pretok) split(runes []rune) [][2]int {
	if p.stages != nil {
		return splitStages(runes, p.stages)
	}
	if p.llama3 {
		return splitLlama3(runes, p.maxDigits)
	}
	return splitGPT2(runes)
}

// Character classes of llama.cpp's unicode_cpt_flags. Its whitespace set
// is exactly Unicode's White_Space property, which unicode.IsSpace is.
const outOfRange = -1

type cls struct{ letter, number, space, valid bool }

func classOf(runes []rune, i int) cls {
	if i < 0 || i >= len(runes) {
		return cls{}
	}
	r := runes[i]
	return cls{letter: unicode.IsLetter(r), number: unicode.IsNumber(r), space: unicode.IsSpace(r), valid: true}
}

func runeAt(runes []rune, i int) rune {
	if i < 0 || i >= len(runes) {
		return outOfRange
	}
	return runes[i]
}

// splitter accumulates words ending at successive positions.
type splitter struct {
	words   [][2]int
	prevEnd int
}

func (s *splitter) add(end int) int {
	n := end - s.prevEnd
	if n > 0 {
		s.words = append(s.words, [2]int{s.prevEnd, end})
	}
	s.prevEnd = end
	return n
}

// splitGPT2: 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
func splitGPT2(runes []rune) [][2]int {
	var s splitter
	end := len(runes)
	for pos := 0; pos < end; {
		c := runes[pos]
		f := classOf(runes, pos)

		if c == '\'' && pos+1 < end {
			n := runes[pos+1]
			if n == 's' || n == 't' || n == 'm' || n == 'd' {
				pos += s.add(pos + 2)
				continue
			}
			if pos+2 < end {
				nn := runes[pos+2]
				if (n == 'r' && nn == 'e') || (n == 'v' && nn == 'e') || (n == 'l' && nn == 'l') {
					pos += s.add(pos + 3)
					continue
				}
			}
		}

		f2 := f
		if c == ' ' {
			f2 = classOf(runes, pos+1)
		}
		lead := 0
		if c == ' ' {
			lead = 1
		}
		switch {
		case f2.letter:
			pos += lead
			for classOf(runes, pos).letter {
				pos++
			}
			s.add(pos)
			continue
		case f2.number:
			pos += lead
			for classOf(runes, pos).number {
				pos++
			}
			s.add(pos)
			continue
		case !(f2.space || f2.letter || f2.number) && f2.valid:
			pos += lead
			for g := classOf(runes, pos); !(g.space || g.letter || g.number) && g.valid; g = classOf(runes, pos) {
				pos++
			}
			s.add(pos)
			continue
		}

		ws := 0
		for classOf(runes, pos+ws).space {
			ws++
		}
		// \s+(?!\S): a run of spaces followed by a non-space leaves its last
		// space to start the next word.
		if ws > 1 && runeAt(runes, pos+ws) != outOfRange {
			pos += ws - 1
			s.add(pos)
			continue
		}
		if ws > 0 {
			pos += ws
			s.add(pos)
			continue
		}
		pos++
		s.add(pos)
	}
	return s.words
}

// splitLlama3: (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
// ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
func splitLlama3(runes []rune, maxDigits int) [][2]int {
	var s splitter
	end := len(runes)
	for pos := 0; pos < end; {
		c := runes[pos]
		f := classOf(runes, pos)

		if c == '\'' && pos+1 < end {
			n := unicode.ToLower(runes[pos+1])
			if n == 's' || n == 't' || n == 'm' || n == 'd' {
				pos += s.add(pos + 2)
				continue
			}
			if pos+2 < end {
				nn := unicode.ToLower(runes[pos+2])
				if (n == 'r' && nn == 'e') || (n == 'v' && nn == 'e') || (n == 'l' && nn == 'l') {
					pos += s.add(pos + 3)
					continue
				}
			}
		}

		// [^\r\n\p{L}\p{N}]?\p{L}+
		if !(c == '\r' || c == '\n' || f.number) {
			if f.letter || classOf(runes, pos+1).letter {
				pos++
				for classOf(runes, pos).letter {
					pos++
				}
				s.add(pos)
				continue
			}
		}

		// \p{N}{1,3}
		if f.number {
			ini := pos
			for classOf(runes, pos).number {
				pos++
				if pos-ini >= maxDigits {
					s.add(pos)
					ini = pos
				}
			}
			s.add(pos)
			continue
		}

		// ?[^\s\p{L}\p{N}]+[\r\n]*
		f2 := f
		if c == ' ' {
			f2 = classOf(runes, pos+1)
		}
		if !(f2.space || f2.letter || f2.number) && f.valid {
			if c == ' ' {
				pos++
			}
			for !(f2.space || f2.letter || f2.number) && f2.valid {
				pos++
				f2 = classOf(runes, pos)
			}
			for c2 := runeAt(runes, pos); c2 == '\r' || c2 == '\n'; c2 = runeAt(runes, pos) {
				pos++
			}
			s.add(pos)
			continue
		}

		ws, lastRN := 0, 0
		for classOf(runes, pos+ws).space {
			if c2 := runes[pos+ws]; c2 == '\r' || c2 == '\n' {
				lastRN = pos + ws + 1
			}
			ws++
		}
		// \s*[\r\n]+
		if lastRN > 0 {
			pos = lastRN
			s.add(pos)
			continue
		}
		// \s+(?!\S)
		if ws > 1 && runeAt(runes, pos+ws) != outOfRange {
			pos += ws - 1
			s.add(pos)
			continue
		}
		if ws > 0 {
			pos += ws
			s.add(pos)
			continue
		}
		pos++
		s.add(pos)
	}
	return s.words
}
