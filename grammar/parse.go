package grammar

import (
	"fmt"
	"strconv"
	"unicode/utf8"
)

// Limits on what one grammar may expand to, so that a hostile grammar (a
// request's) fails with an error instead of exhausting memory.
const (
	maxRepeat = 10000   // the largest count of a {m,n}
	maxElems  = 1 << 22 // symbols after repetitions are expanded
)

// SyntaxError is a GBNF source that does not parse, at Line:Col (1-based,
// Col in bytes).
type SyntaxError struct {
	Line, Col int
	Msg       string
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("grammar: line %d col %d: %s", e.Line, e.Col, e.Msg)
}

// Parse reads a GBNF grammar as llama.cpp writes them: rules `name ::=
// alternatives`, `|`, sequences, groups `( )`, the repetitions `*` `+` `?`
// `{m}` `{m,}` `{m,n}`, string literals and character classes (`[a-z]`,
// negated `[^"]`) with the escapes \x \u \U \t \r \n \\ \" \[ \], `.` for
// any character, and `#` comments. Generation starts at the rule "root".
func Parse(src string) (*Grammar, error) {
	p := &parser{src: src, ids: map[string]int32{}}
	if err := p.parse(); err != nil {
		return nil, err
	}
	return p.g, nil
}

type rawRule struct {
	alts    [][]elem
	defined bool
	refAt   int // where it was first referred to, for an undefined rule
}

type parser struct {
	src   string
	pos   int
	ids   map[string]int32
	rules []rawRule
	names []string
	n     int // symbols so far
	g     *Grammar
}

func (p *parser) errAt(pos int, format string, args ...any) error {
	line, col := 1, 1
	for i := 0; i < pos && i < len(p.src); i++ {
		if p.src[i] == '\n' {
			line++
			col = 1
		} else {
			col++
		}
	}
	return &SyntaxError{Line: line, Col: col, Msg: fmt.Sprintf(format, args...)}
}

func (p *parser) peek(k int) byte {
	if p.pos+k < len(p.src) {
		return p.src[p.pos+k]
	}
	return 0
}

func (p *parser) eof() bool { return p.pos >= len(p.src) }

func (p *parser) space(newlines bool) {
	for !p.eof() {
		switch c := p.src[p.pos]; {
		case c == ' ' || c == '\t':
			p.pos++
		case c == '#':
			for !p.eof() && p.src[p.pos] != '\n' && p.src[p.pos] != '\r' {
				p.pos++
			}
		case newlines && (c == '\n' || c == '\r'):
			p.pos++
		default:
			return
		}
	}
}

func isWordChar(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_'
}

func (p *parser) symbol(name string, at int) int32 {
	if id, ok := p.ids[name]; ok {
		return id
	}
	id := int32(len(p.rules))
	p.ids[name] = id
	p.rules = append(p.rules, rawRule{refAt: at})
	p.names = append(p.names, name)
	return id
}

// fresh makes a rule for a group or a repetition, named after the rule it
// is part of.
func (p *parser) fresh(base string) int32 {
	id := int32(len(p.rules))
	p.rules = append(p.rules, rawRule{defined: true})
	p.names = append(p.names, base+"_"+strconv.Itoa(int(id)))
	return id
}

func (p *parser) add(n int) error {
	p.n += n
	if p.n > maxElems {
		return p.errAt(p.pos, "grammar expands to more than %d symbols", maxElems)
	}
	return nil
}

func (p *parser) parse() error {
	p.space(true)
	for !p.eof() {
		if err := p.rule(); err != nil {
			return err
		}
	}
	root, ok := p.ids["root"]
	if !ok {
		return p.errAt(len(p.src), "no rule named root")
	}
	for id, r := range p.rules {
		if !r.defined {
			return p.errAt(r.refAt, "rule %q is used but not defined", p.names[id])
		}
	}
	g := &Grammar{names: p.names, root: root, src: p.src, alts: make([][]int32, len(p.rules))}
	for id, r := range p.rules {
		for _, a := range r.alts {
			g.alts[id] = append(g.alts[id], int32(len(g.elems)))
			g.elems = append(g.elems, a...)
			g.elems = append(g.elems, elem{kind: kEnd})
		}
	}
	if err := g.check(); err != nil {
		return err
	}
	p.g = g
	return nil
}

func (p *parser) name() (string, error) {
	start := p.pos
	for !p.eof() && isWordChar(p.src[p.pos]) {
		p.pos++
	}
	if p.pos == start {
		return "", p.errAt(start, "expected a rule name")
	}
	return p.src[start:p.pos], nil
}

func (p *parser) rule() error {
	at := p.pos
	name, err := p.name()
	if err != nil {
		return err
	}
	id := p.symbol(name, at)
	if p.rules[id].defined {
		return p.errAt(at, "rule %q is defined twice", name)
	}
	p.rules[id].defined = true
	p.space(false)
	if !(p.peek(0) == ':' && p.peek(1) == ':' && p.peek(2) == '=') {
		return p.errAt(p.pos, "expected ::= after rule name %q", name)
	}
	p.pos += 3
	p.space(true)
	alts, err := p.alternates(name, false)
	if err != nil {
		return err
	}
	p.rules[id].alts = alts
	switch {
	case p.peek(0) == '\r':
		p.pos++
		if p.peek(0) == '\n' {
			p.pos++
		}
	case p.peek(0) == '\n':
		p.pos++
	case !p.eof():
		return p.errAt(p.pos, "expected a newline or the end, found %q", p.src[p.pos:p.pos+1])
	}
	p.space(true)
	return nil
}

func (p *parser) alternates(rule string, nested bool) ([][]elem, error) {
	var alts [][]elem
	for {
		seq, err := p.sequence(rule, nested)
		if err != nil {
			return nil, err
		}
		alts = append(alts, seq)
		if p.peek(0) != '|' {
			return alts, nil
		}
		p.pos++
		p.space(true)
	}
}

func (p *parser) sequence(rule string, nested bool) ([]elem, error) {
	var seq []elem
	last := -1 // where the last item starts in seq, for a repetition
	for !p.eof() {
		c := p.src[p.pos]
		start := p.pos
		switch {
		case c == '"':
			p.pos++
			last = len(seq)
			for p.peek(0) != '"' {
				if p.eof() {
					return nil, p.errAt(start, "unterminated string literal")
				}
				r, err := p.char()
				if err != nil {
					return nil, err
				}
				seq = append(seq, elem{kind: kChar, ranges: []rune{r, r}})
			}
			p.pos++
			if err := p.add(len(seq) - last); err != nil {
				return nil, err
			}
		case c == '[':
			p.pos++
			e := elem{kind: kChar}
			if p.peek(0) == '^' {
				e.neg = true
				p.pos++
			}
			for p.peek(0) != ']' {
				if p.eof() {
					return nil, p.errAt(start, "unterminated character class")
				}
				lo, err := p.char()
				if err != nil {
					return nil, err
				}
				hi := lo
				if p.peek(0) == '-' && p.peek(1) != ']' && p.pos+1 < len(p.src) {
					p.pos++
					rangeAt := p.pos
					if hi, err = p.char(); err != nil {
						return nil, err
					}
					if hi < lo {
						return nil, p.errAt(rangeAt, "empty character range %q-%q", lo, hi)
					}
				}
				e.ranges = append(e.ranges, lo, hi)
			}
			p.pos++
			last = len(seq)
			seq = append(seq, e)
			if err := p.add(1); err != nil {
				return nil, err
			}
		case isWordChar(c):
			name, _ := p.name()
			last = len(seq)
			seq = append(seq, elem{kind: kRef, rule: p.symbol(name, start)})
			if err := p.add(1); err != nil {
				return nil, err
			}
		case c == '(':
			p.pos++
			p.space(true)
			id := p.fresh(rule)
			alts, err := p.alternates(rule, true)
			if err != nil {
				return nil, err
			}
			p.rules[id].alts = alts
			if p.peek(0) != ')' {
				return nil, p.errAt(p.pos, "expected ')' to close the group at line %d", p.line(start))
			}
			p.pos++
			last = len(seq)
			seq = append(seq, elem{kind: kRef, rule: id})
			if err := p.add(1); err != nil {
				return nil, err
			}
		case c == '.':
			p.pos++
			last = len(seq)
			seq = append(seq, elem{kind: kChar, neg: true})
			if err := p.add(1); err != nil {
				return nil, err
			}
		case c == '*' || c == '+' || c == '?' || c == '{':
			lo, hi, err := p.repetition()
			if err != nil {
				return nil, err
			}
			if last < 0 {
				return nil, p.errAt(start, "%q has nothing before it to repeat", c)
			}
			if seq, err = p.repeat(rule, seq, last, lo, hi); err != nil {
				return nil, err
			}
			last = -1
		default:
			return seq, nil
		}
		p.space(nested)
	}
	return seq, nil
}

func (p *parser) line(pos int) int {
	err := p.errAt(pos, "").(*SyntaxError)
	return err.Line
}

// repetition reads * + ? {m} {m,} {m,n}; hi < 0 is unbounded.
func (p *parser) repetition() (lo, hi int, err error) {
	c := p.src[p.pos]
	p.pos++
	switch c {
	case '*':
		return 0, -1, nil
	case '+':
		return 1, -1, nil
	case '?':
		return 0, 1, nil
	}
	p.space(true)
	if lo, err = p.int(); err != nil {
		return 0, 0, err
	}
	p.space(true)
	switch p.peek(0) {
	case '}':
		p.pos++
		return lo, lo, nil
	case ',':
		p.pos++
		p.space(true)
		hi = -1
		if c := p.peek(0); '0' <= c && c <= '9' {
			at := p.pos
			if hi, err = p.int(); err != nil {
				return 0, 0, err
			}
			if hi < lo {
				return 0, 0, p.errAt(at, "repetition {%d,%d} has its maximum below its minimum", lo, hi)
			}
			p.space(true)
		}
		if p.peek(0) != '}' {
			return 0, 0, p.errAt(p.pos, "expected '}' to close the repetition")
		}
		p.pos++
		return lo, hi, nil
	}
	return 0, 0, p.errAt(p.pos, "expected ',' or '}' in the repetition")
}

func (p *parser) int() (int, error) {
	start := p.pos
	for c := p.peek(0); '0' <= c && c <= '9'; c = p.peek(0) {
		p.pos++
	}
	if p.pos == start {
		return 0, p.errAt(start, "expected an integer")
	}
	n, err := strconv.Atoi(p.src[start:p.pos])
	if err != nil || n > maxRepeat {
		return 0, p.errAt(start, "repetition count %s is over %d", p.src[start:p.pos], maxRepeat)
	}
	return n, nil
}

// repeat rewrites seq[last:] as llama.cpp does: S{m,n} is S m times, then
// n-m nested optional rules S'(k) ::= S S'(k-1) | ε; S{m,} is S m times
// then S' ::= S S' | ε.
func (p *parser) repeat(rule string, seq []elem, last, lo, hi int) ([]elem, error) {
	item := append([]elem(nil), seq[last:]...)
	grow := len(item) * max(lo-1, 0)
	if hi > lo {
		grow += (len(item) + 1) * (hi - lo)
	}
	if err := p.add(grow + 1); err != nil {
		return nil, err
	}
	if lo == 0 {
		seq = seq[:last]
	}
	for i := 1; i < lo; i++ {
		seq = append(seq, item...)
	}
	if hi < 0 {
		id := p.fresh(rule)
		body := append(append([]elem(nil), item...), elem{kind: kRef, rule: id})
		p.rules[id].alts = [][]elem{body, nil}
		return append(seq, elem{kind: kRef, rule: id}), nil
	}
	prev := int32(-1)
	for i := 0; i < hi-lo; i++ {
		id := p.fresh(rule)
		body := append([]elem(nil), item...)
		if prev >= 0 {
			body = append(body, elem{kind: kRef, rule: prev})
		}
		p.rules[id].alts = [][]elem{body, nil}
		prev = id
	}
	if prev >= 0 {
		seq = append(seq, elem{kind: kRef, rule: prev})
	}
	return seq, nil
}

// char reads one character of a literal or class: an escape or one UTF-8
// encoded code point.
func (p *parser) char() (rune, error) {
	start := p.pos
	if p.peek(0) == '\\' {
		c := p.peek(1)
		p.pos += 2
		switch c {
		case 'x':
			return p.hex(start, 2)
		case 'u':
			return p.hex(start, 4)
		case 'U':
			return p.hex(start, 8)
		case 't':
			return '\t', nil
		case 'r':
			return '\r', nil
		case 'n':
			return '\n', nil
		case '\\', '"', '[', ']', '-', '^':
			return rune(c), nil
		}
		p.pos = start
		return 0, p.errAt(start, "unknown escape \\%c", c)
	}
	r, n := utf8.DecodeRuneInString(p.src[p.pos:])
	if r == utf8.RuneError && n <= 1 {
		return 0, p.errAt(start, "invalid UTF-8")
	}
	p.pos += n
	return r, nil
}

func (p *parser) hex(start, n int) (rune, error) {
	if p.pos+n > len(p.src) {
		return 0, p.errAt(start, "expected %d hex digits", n)
	}
	v, err := strconv.ParseUint(p.src[p.pos:p.pos+n], 16, 32)
	if err != nil || v > utf8.MaxRune {
		return 0, p.errAt(start, "bad escape %q: expected %d hex digits of a code point", p.src[start:p.pos+n], n)
	}
	p.pos += n
	return rune(v), nil
}
