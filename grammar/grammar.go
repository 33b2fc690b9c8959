// Package grammar constrains generation to a formal language: llama.cpp's
// GBNF grammars (Parse), JSON Schemas turned into GBNF (FromJSONSchema,
// JSONObject), and a Matcher that follows the text generated so far and
// tells, for a whole vocabulary at once, which tokens may come next.
//
// The Matcher is a pushdown recognizer over Unicode code points, fed bytes
// (a token may end inside a character; byte-fallback tokens spell one a
// byte at a time). Its configurations (sets of rule stacks, plus a partial
// character) are interned as states, and each state's byte transitions are
// computed once, so a mask is a walk of the vocabulary's prefix tree (Trie)
// that mostly reads a table. Constrain binds a Matcher to an engine.Generator.
package grammar

import (
	"fmt"
	"strings"
)

type elemKind uint8

const (
	kEnd  elemKind = iota // end of an alternative
	kChar                 // one code point from a class
	kRef                  // a rule
)

// elem is one symbol of an alternative. Alternatives lie end to end in
// Grammar.elems, each closed by a kEnd, so that a position (an index) names
// a place in a rule and position+1 is what follows it.
type elem struct {
	kind elemKind
	neg  bool
	rule int32
	// ranges are inclusive [lo, hi] code-point pairs.
	ranges []rune
}

func (e *elem) matches(c rune) bool {
	in := false
	for i := 0; i < len(e.ranges); i += 2 {
		if e.ranges[i] <= c && c <= e.ranges[i+1] {
			in = true
			break
		}
	}
	return in != e.neg
}

// intersects reports whether the class holds a code point in [lo, hi].
func (e *elem) intersects(lo, hi rune) bool {
	if !e.neg {
		for i := 0; i < len(e.ranges); i += 2 {
			if e.ranges[i] <= hi && lo <= e.ranges[i+1] {
				return true
			}
		}
		return false
	}
	// Negated: is some point of [lo, hi] outside every range?
	c := lo
	for c <= hi {
		moved := false
		for i := 0; i < len(e.ranges); i += 2 {
			if e.ranges[i] <= c && c <= e.ranges[i+1] {
				c = e.ranges[i+1] + 1
				moved = true
			}
		}
		if !moved {
			return true
		}
	}
	return false
}

// Grammar is a parsed, checked grammar: rules of alternatives of symbols,
// starting at the rule named "root". It is immutable and may be shared by
// any number of Matchers.
type Grammar struct {
	elems []elem
	alts  [][]int32 // per rule: the positions where its alternatives start
	names []string
	root  int32
	src   string
}

// String is the GBNF source the grammar was parsed from.
func (g *Grammar) String() string { return g.src }

// Rules is the number of rules, those made for groups and repetitions
// included.
func (g *Grammar) Rules() int { return len(g.alts) }

// check rejects left recursion: a rule that can reach itself before
// consuming a character would make the recognizer expand it forever.
func (g *Grammar) check() error {
	n := len(g.alts)
	nullable := make([]bool, n)
	for changed := true; changed; {
		changed = false
		for r := range n {
			if nullable[r] {
				continue
			}
			for _, a := range g.alts[r] {
				if g.nullableFrom(a, nullable) {
					nullable[r] = true
					changed = true
					break
				}
			}
		}
	}
	// first[r]: the rules r may begin with.
	first := make([][]int32, n)
	for r := range n {
		for _, a := range g.alts[r] {
			for p := a; g.elems[p].kind == kRef; p++ {
				first[r] = append(first[r], g.elems[p].rule)
				if !nullable[g.elems[p].rule] {
					break
				}
			}
		}
	}
	const (
		white = iota
		grey
		black
	)
	color := make([]uint8, n)
	var visit func(r int32, path []int32) error
	visit = func(r int32, path []int32) error {
		color[r] = grey
		for _, s := range first[r] {
			switch color[s] {
			case grey:
				var names []string
				for _, q := range append(path, r, s) {
					names = append(names, g.names[q])
				}
				return fmt.Errorf("grammar: left recursion: %s", strings.Join(names, " -> "))
			case white:
				if err := visit(s, append(path, r)); err != nil {
					return err
				}
			}
		}
		color[r] = black
		return nil
	}
	for r := range n {
		if color[r] == white {
			if err := visit(int32(r), nil); err != nil {
				return err
			}
		}
	}
	return nil
}

func (g *Grammar) nullableFrom(p int32, nullable []bool) bool {
	for ; g.elems[p].kind != kEnd; p++ {
		e := &g.elems[p]
		if e.kind == kChar || !nullable[e.rule] {
			return false
		}
	}
	return true
}
