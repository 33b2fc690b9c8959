package tokenizer

import (
	"regexp"
	"unicode"
	"unicode/utf8"
)

// Pre-tokenizers that llama.cpp runs as a sequence of regular expressions
// (llama-vocab.cpp, llm_tokenizer_bpe; unicode.cpp, unicode_regex_split):
// each expression cuts every piece the previous ones left into its matches
// and the gaps between them. An expression that names \p{…} categories
// runs, in llama.cpp, on a "collapsed" text where each non-ASCII character
// stands for its category; the others run on the text with non-ASCII
// whitespace turned into \v. The stages below do the same with Go's
// regexp: the categories become private-use characters, \s is spelled
// [\t\n\v\f\r ] (std::regex's \s; Go's leaves out \v), and the one
// lookahead, \s+(?!\S), is applied after the match.

// Collapsed stand-ins for the categories llama.cpp collapses (its 0xD0…0xD5).
const (
	colOther  = '\uE000'
	colNumber = '\uE001'
	colLetter = '\uE002'
	colPunct  = '\uE003'
	colMark   = '\uE004'
	colSymbol = '\uE005'
)

// The collapsed regular expressions spell each category as its stand-in
// plus the ASCII characters llama.cpp keeps as themselves (k_ucat_map).
const (
	reN  = `\x{E001}0-9`
	reL  = `\x{E002}A-Za-z`
	reP  = `\x{E003}!-#%-*,-/:-;?-@\[-\]_\{\}`
	reM  = `\x{E004}`
	reS  = `\x{E005}\$\+<=>\^` + "`" + `\|`
	reWS = `\t\n\v\f\r `
)

// stage cuts one piece (runes) into words, as [start, end) offsets that
// cover it.
type stage func(runes []rune) [][2]int

// reStage is one regular expression of a sequence. collapsed: it runs on
// the collapsed text. lookaheadWS: its last alternative is a group standing
// for \s+(?!\S)|\s+.
type reStage struct {
	re          *regexp.Regexp
	collapsed   bool
	lookaheadWS bool
}

func (r reStage) split(runes []rune) [][2]int {
	text := make([]rune, len(runes))
	for i, c := range runes {
		text[i] = c
		if c < utf8.RuneSelf {
			continue
		}
		switch {
		case unicode.IsSpace(c):
			text[i] = '\v'
		case !r.collapsed:
		case unicode.IsNumber(c):
			text[i] = colNumber
		case unicode.IsLetter(c):
			text[i] = colLetter
		case unicode.IsPunct(c):
			text[i] = colPunct
		case unicode.IsMark(c):
			text[i] = colMark
		case unicode.IsSymbol(c):
			text[i] = colSymbol
		default:
			text[i] = colOther
		}
	}
	s := string(text)
	// runeAt[b] is the rune index of byte offset b.
	runeAt := make([]int, len(s)+1)
	n := 0
	for b := range s {
		runeAt[b] = n
		n++
	}
	runeAt[len(s)] = n
	for b := len(s) - 1; b >= 0; b-- {
		if !utf8.RuneStart(s[b]) {
			runeAt[b] = runeAt[b+1]
		}
	}

	var out [][2]int
	last := 0 // rune offset after the last match
	for pos := 0; pos < len(s); {
		m := r.re.FindStringSubmatchIndex(s[pos:])
		if m == nil || m[1] == m[0] {
			break
		}
		start, end := pos+m[0], pos+m[1]
		if r.lookaheadWS && m[len(m)-2] >= 0 && end < len(s) && runeAt[end]-runeAt[start] > 1 {
			// \s+(?!\S): the run gives back its last character, which
			// goes with the word that follows.
			_, w := utf8.DecodeLastRuneInString(s[:end])
			end -= w
		}
		if rs := runeAt[start]; rs > last {
			out = append(out, [2]int{last, rs})
		}
		out = append(out, [2]int{runeAt[start], runeAt[end]})
		last = runeAt[end]
		pos = end
	}
	if last < len(runes) {
		out = append(out, [2]int{last, len(runes)})
	}
	return out
}

func wregex(expr string) stage {
	return reStage{re: regexp.MustCompile(expr)}.split
}

func collapsedRegex(expr string, lookaheadWS bool) stage {
	return reStage{re: regexp.MustCompile(expr), collapsed: true, lookaheadWS: lookaheadWS}.split
}

// splitStages runs the stages in turn, each over the pieces the previous
// ones made.
func splitStages(runes []rune, stages []stage) [][2]int {
	pieces := [][2]int{{0, len(runes)}}
	for _, st := range stages {
		var next [][2]int
		for _, p := range pieces {
			for _, w := range st(runes[p[0]:p[1]]) {
				next = append(next, [2]int{p[0] + w[0], p[0] + w[1]})
			}
		}
		pieces = next
	}
	return pieces
}

// SmolLM (and StarCoder, Refact, Command R, CodeShell, EXAONE, Minerva):
// every digit on its own, then GPT-2's expression, which llama.cpp runs as
// its GPT-2 scanner.
var stagesSmolLM = []stage{
	collapsedRegex(`[`+reN+`]`, false),
	splitGPT2,
}

// DeepSeek LLM: its expressions, verbatim but for \s.
var stagesDeepSeekLLM = []stage{
	wregex(`[\r\n]`),
	wregex(`[` + reWS + `]?` + reDeepSeekLetters + `+`),
	wregex(`[` + reWS + `]?` + reDeepSeekPunct + `+`),
	wregex(`[` + reWS + `]+$`),
	wregex(reDeepSeekHan + `+`),
	collapsedRegex(`[`+reN+`]+`, false),
}

// DeepSeek V3.
var stagesDeepSeekV3 = []stage{
	collapsedRegex(`[`+reN+`]{1,3}`, false),
	wregex(reDeepSeekKana + `+`),
	collapsedRegex(`[!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`+"`"+`{|}~][A-Za-z]+`+
		`|[^\r\n`+reL+reP+reS+`]?[`+reL+reM+`]+`+
		`| ?[`+reP+reS+`]+[\r\n]*`+
		`|[`+reWS+`]*[\r\n]+`+
		`|([`+reWS+`]+)`, true),
}
