package grammar

import (
	"fmt"
	"regexp/syntax"
	"strings"
	"unicode"
)

// pattern is the rule of a JSON string whose text matches the regular
// expression re (JSON Schema's "pattern", ECMA-262 syntax, which Go's
// regexp/syntax reads for the common subset: literals, classes, \d \w \s,
// ., groups, |, *, +, ?, {m,n}, (?i)). As the schema has it the match may
// be anywhere: an end without its anchor (^, $) takes any characters
// there. Written as JSON, a literal character is escaped where JSON wants
// it; a class or . never yields '"', '\' or a control character (written
// unescaped they would break the string), so the grammar's documents are
// a subset of the pattern's, every one of them valid. Anchors other than
// at the ends, backreferences and lookarounds are errors.
func (c *conv) pattern(re, path, hint string) (string, error) {
	fail := func(format string, a ...any) error {
		return fmt.Errorf("grammar: schema %s: pattern %q: %s", path, re, fmt.Sprintf(format, a...))
	}
	tree, err := syntax.Parse(re, syntax.Perl)
	if err != nil {
		return "", fail("%v", err)
	}
	tree = tree.Simplify()
	// The ends: ^ and $ where they are, any characters where they are not.
	parts := []*syntax.Regexp{tree}
	if tree.Op == syntax.OpConcat {
		parts = tree.Sub
	}
	head, tail := "char* ", " char*"
	if len(parts) > 0 && parts[0].Op == syntax.OpBeginText {
		head, parts = "", parts[1:]
	}
	if n := len(parts); n > 0 && parts[n-1].Op == syntax.OpEndText {
		tail, parts = "", parts[:n-1]
	}
	p := patternConv{c: c, hint: hint, fail: fail}
	var body []string
	for _, sub := range parts {
		s, err := p.node(sub)
		if err != nil {
			return "", err
		}
		body = append(body, s)
	}
	inner := strings.Join(body, " ")
	if inner == "" {
		inner = `""`
	}
	return c.add(hint, `"\"" `+head+"("+inner+")"+tail+` "\"" space`), nil
}

type patternConv struct {
	c    *conv
	hint string
	fail func(format string, a ...any) error
}

// node is the GBNF of one node of the expression, as JSON string text.
func (p *patternConv) node(re *syntax.Regexp) (string, error) {
	switch re.Op {
	case syntax.OpEmptyMatch:
		return `""`, nil
	case syntax.OpLiteral:
		var parts []string
		var lit strings.Builder
		for _, r := range re.Rune {
			if re.Flags&syntax.FoldCase != 0 && unicode.SimpleFold(r) != r {
				if lit.Len() > 0 {
					parts = append(parts, gbnfString(lit.String()))
					lit.Reset()
				}
				parts = append(parts, foldClass(r))
				continue
			}
			lit.WriteString(jsonChar(r))
		}
		if lit.Len() > 0 {
			parts = append(parts, gbnfString(lit.String()))
		}
		return "(" + strings.Join(parts, " ") + ")", nil
	case syntax.OpCharClass:
		return p.class(re.Rune)
	case syntax.OpAnyCharNotNL, syntax.OpAnyChar:
		return p.class([]rune{0, unicode.MaxRune})
	case syntax.OpCapture:
		return p.node(re.Sub[0])
	case syntax.OpConcat, syntax.OpAlternate:
		parts := make([]string, len(re.Sub))
		for i, sub := range re.Sub {
			s, err := p.node(sub)
			if err != nil {
				return "", err
			}
			parts[i] = s
		}
		sep := " "
		if re.Op == syntax.OpAlternate {
			sep = " | "
		}
		return "(" + strings.Join(parts, sep) + ")", nil
	case syntax.OpStar, syntax.OpPlus, syntax.OpQuest:
		if re.Op != syntax.OpQuest && nullable(re.Sub[0]) {
			return "", p.fail("an unbounded repetition of what may be empty (such as (a*)*) is not supported")
		}
		s, err := p.node(re.Sub[0])
		if err != nil {
			return "", err
		}
		return "(" + s + ")" + map[syntax.Op]string{syntax.OpStar: "*", syntax.OpPlus: "+", syntax.OpQuest: "?"}[re.Op], nil
	case syntax.OpRepeat:
		if re.Min > maxRepeat || re.Max > maxRepeat {
			return "", p.fail("a repetition over %d", maxRepeat)
		}
		if re.Max < 0 && nullable(re.Sub[0]) {
			return "", p.fail("an unbounded repetition of what may be empty (such as (a*)*) is not supported")
		}
		s, err := p.node(re.Sub[0])
		if err != nil {
			return "", err
		}
		return "(" + s + ")" + repeatSuffix(re.Min, re.Max, re.Max >= 0), nil
	case syntax.OpBeginText, syntax.OpEndText, syntax.OpBeginLine, syntax.OpEndLine:
		return "", p.fail("^ and $ are supported only at the pattern's ends")
	case syntax.OpNoMatch:
		return "", p.fail("matches nothing")
	}
	return "", p.fail("%v is not supported (literals, classes, ., groups, |, *, +, ?, {m,n})", re)
}

// nullable reports whether re matches the empty string: GBNF's unbounded
// repetition of such a part is left-recursive.
func nullable(re *syntax.Regexp) bool {
	switch re.Op {
	case syntax.OpEmptyMatch, syntax.OpStar, syntax.OpQuest, syntax.OpBeginText, syntax.OpEndText,
		syntax.OpBeginLine, syntax.OpEndLine, syntax.OpWordBoundary, syntax.OpNoWordBoundary:
		return true
	case syntax.OpLiteral:
		return len(re.Rune) == 0
	case syntax.OpCapture, syntax.OpPlus:
		return nullable(re.Sub[0])
	case syntax.OpRepeat:
		return re.Min == 0 || nullable(re.Sub[0])
	case syntax.OpConcat:
		for _, sub := range re.Sub {
			if !nullable(sub) {
				return false
			}
		}
		return true
	case syntax.OpAlternate:
		for _, sub := range re.Sub {
			if nullable(sub) {
				return true
			}
		}
	}
	return false
}

// class is a character class without what JSON must escape ('"', '\',
// controls), as a GBNF class; one left empty is an error.
func (p *patternConv) class(ranges []rune) (string, error) {
	var b strings.Builder
	b.WriteByte('[')
	n := 0
	for i := 0; i+1 < len(ranges); i += 2 {
		lo, hi := ranges[i], ranges[i+1]
		for lo <= hi {
			// The next run of lo..hi that needs no escape.
			for lo <= hi && needsEscape(lo) {
				lo++
			}
			end := lo
			for end < hi && !needsEscape(end+1) {
				end++
			}
			if lo > hi {
				break
			}
			b.WriteString(classRune(lo))
			if end > lo {
				b.WriteString("-" + classRune(end))
			}
			n++
			lo = end + 1
		}
	}
	if n == 0 {
		return "", p.fail("a class of only characters JSON escapes (\", \\, controls) is not supported")
	}
	b.WriteByte(']')
	return b.String(), nil
}

func needsEscape(r rune) bool { return r < 0x20 || r == '"' || r == '\\' || r == 0x7F }

// classRune writes r for a GBNF class: as itself where it is a letter or a
// digit, else escaped.
func classRune(r rune) string {
	switch {
	case r < 0x80 && (unicode.IsLetter(r) || unicode.IsDigit(r)):
		return string(r)
	case r <= 0xFF:
		return fmt.Sprintf(`\x%02X`, r)
	case r <= 0xFFFF:
		return fmt.Sprintf(`\u%04X`, r)
	}
	return fmt.Sprintf(`\U%08X`, r)
}

// jsonChar is r as a JSON string writes it.
func jsonChar(r rune) string {
	switch {
	case r == '"' || r == '\\':
		return `\` + string(r)
	case r == '\n':
		return `\n`
	case r == '\r':
		return `\r`
	case r == '\t':
		return `\t`
	case needsEscape(r):
		return fmt.Sprintf(`\u%04x`, r)
	}
	return string(r)
}

// foldClass is the class of r and its case folds.
func foldClass(r rune) string {
	var b strings.Builder
	b.WriteByte('[')
	for f := r; ; {
		b.WriteString(classRune(f))
		if f = unicode.SimpleFold(f); f == r {
			break
		}
	}
	b.WriteByte(']')
	return b.String()
}
