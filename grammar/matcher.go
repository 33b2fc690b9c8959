package grammar

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"unicode/utf8"
)

// dead is the state with no stack left: nothing generated from it can
// match.
const dead int32 = 0

// Limits on a matcher's caches: a generation that outgrows them (a grammar
// whose stacks keep growing) starts the caches afresh.
var maxStates = 1 << 14 // 16 MiB of transitions; a variable for the tests of trim

const (
	chunkBits = 6
	chunkMask = 1<<chunkBits - 1
)

// maxStacks bounds the stacks of one state: an ambiguous grammar can make
// their number grow exponentially with its nesting.
const maxStacks = 1 << 12

// ErrAmbiguous is the error of a grammar whose recognizer would follow
// more than maxStacks parses at once.
var ErrAmbiguous = fmt.Errorf("grammar: too ambiguous: more than %d parses at once", maxStacks)

// maxMasks bounds the masks kept by state (each is vocabulary/8 bytes).
const maxMasks = 256

// state is a set of rule stacks (their interned ids, sorted; stack 0, the
// empty one, means the text may end here) and the character being read:
// cp holds its bits so far, need the continuation bytes still due, size
// its length.
type state struct {
	stacks []int32
	cp     rune
	need   uint8
	size   uint8
}

// Matcher follows generated text through a grammar. It is not safe for
// concurrent use; each generation has its own.
type Matcher struct {
	g    *Grammar
	trie *Trie

	// Stacks are persistent lists, interned: node i is pos[i] on top of
	// next[i], and equal stacks have equal ids.
	pos, next []int32
	nodeID    map[uint64]int32
	expanded  [][]int32 // per node: its expansion to character tops, or nil
	expDone   []bool

	states  []state
	stateID map[string]int32
	// trans[s>>chunkBits][(s&chunkMask)<<8|b] is the state after byte b from
	// state s (-1: not computed), in chunks so that growing copies nothing.
	trans [][]int32
	masks map[int32][]uint64

	cur int32
	// err, once set (ErrAmbiguous), is every later answer.
	err error

	// scratch
	key  []byte
	walk []int32 // the mask walk's state per depth
	set  []int32
}

// NewMatcher starts a recognizer at the beginning of g's root rule; trie is
// the vocabulary its masks are over (nil: Accept and IsComplete only).
func NewMatcher(g *Grammar, trie *Trie) *Matcher {
	m := &Matcher{g: g, trie: trie}
	m.reset()
	m.cur = m.initial()
	return m
}

func (m *Matcher) reset() {
	m.pos, m.next = []int32{-1}, []int32{-1}
	m.nodeID = map[uint64]int32{}
	m.expanded, m.expDone = [][]int32{nil}, []bool{false}
	m.states = []state{{}}
	m.stateID = map[string]int32{"": dead}
	// The dead state's row: every byte leads to dead (0).
	m.trans = [][]int32{make([]int32, 256<<chunkBits)}
	m.masks = map[int32][]uint64{}
}

func (m *Matcher) initial() int32 {
	m.set = m.set[:0]
	for _, a := range m.g.alts[m.g.root] {
		if m.g.elems[a].kind == kEnd {
			m.addStack(0)
		} else {
			m.expandInto(m.push(a, 0))
		}
	}
	return m.intern(state{stacks: m.sortedSet()})
}

func (m *Matcher) push(p, next int32) int32 {
	k := uint64(uint32(p))<<32 | uint64(uint32(next))
	if id, ok := m.nodeID[k]; ok {
		return id
	}
	id := int32(len(m.pos))
	m.pos = append(m.pos, p)
	m.next = append(m.next, next)
	m.expanded = append(m.expanded, nil)
	m.expDone = append(m.expDone, false)
	m.nodeID[k] = id
	return id
}

func (m *Matcher) addStack(s int32) {
	// Sets of stacks are small: a scan beats a map and makes no garbage.
	if !slices.Contains(m.set, s) {
		if len(m.set) >= maxStacks {
			m.err = ErrAmbiguous
			return
		}
		m.set = append(m.set, s)
	}
}

// expandInto adds the stacks s stands for whose top is a character (or the
// empty stack): a rule on top is replaced by each of its alternatives.
func (m *Matcher) expandInto(s int32) {
	if s == 0 {
		m.addStack(0)
		return
	}
	if m.expDone[s] {
		for _, t := range m.expanded[s] {
			m.addStack(t)
		}
		return
	}
	// Expand on the side, then merge, so the memo holds s's own set.
	saveSet := m.set
	m.set = nil
	m.expandRaw(s)
	own := m.set
	m.set = saveSet
	m.expanded[s], m.expDone[s] = own, true
	for _, t := range own {
		m.addStack(t)
	}
}

func (m *Matcher) expandRaw(s int32) {
	if s == 0 {
		m.addStack(0)
		return
	}
	p := m.pos[s]
	e := &m.g.elems[p]
	if e.kind == kChar {
		m.addStack(s)
		return
	}
	rest := m.next[s]
	if m.g.elems[p+1].kind != kEnd {
		rest = m.push(p+1, rest)
	}
	for _, a := range m.g.alts[e.rule] {
		if m.g.elems[a].kind == kEnd {
			m.expandInto(rest)
		} else {
			m.expandInto(m.push(a, rest))
		}
	}
}

func (m *Matcher) sortedSet() []int32 {
	out := slices.Clone(m.set)
	slices.Sort(out)
	return out
}

func (m *Matcher) intern(st state) int32 {
	if len(st.stacks) == 0 {
		return dead
	}
	k := m.key[:0]
	k = append(k, byte(st.need), byte(st.size))
	k = binary.LittleEndian.AppendUint32(k, uint32(st.cp))
	for _, s := range st.stacks {
		k = binary.LittleEndian.AppendUint32(k, uint32(s))
	}
	m.key = k
	if id, ok := m.stateID[string(k)]; ok {
		return id
	}
	id := int32(len(m.states))
	m.states = append(m.states, st)
	m.stateID[string(k)] = id
	if id&chunkMask == 0 {
		m.trans = append(m.trans, make([]int32, 256<<chunkBits))
	}
	copy(m.trans[id>>chunkBits][(id&chunkMask)<<8:], unknownRow[:])
	return id
}

// step is the state after byte b from state s.
func (m *Matcher) step(s int32, b byte) int32 {
	if t := m.trans[s>>chunkBits][(s&chunkMask)<<8|int32(b)]; t >= 0 {
		return t
	}
	t := m.computeStep(s, b)
	m.trans[s>>chunkBits][(s&chunkMask)<<8|int32(b)] = t
	return t
}

func (m *Matcher) computeStep(s int32, b byte) int32 {
	st := m.states[s]
	if st.need == 0 {
		switch {
		case b < 0x80:
			return m.advance(st.stacks, rune(b))
		case b&0xE0 == 0xC0 && b >= 0xC2:
			st.cp, st.need, st.size = rune(b&0x1F), 1, 2
		case b&0xF0 == 0xE0:
			st.cp, st.need, st.size = rune(b&0x0F), 2, 3
		case b&0xF8 == 0xF0 && b <= 0xF4:
			st.cp, st.need, st.size = rune(b&0x07), 3, 4
		default:
			return dead
		}
	} else {
		if b&0xC0 != 0x80 {
			return dead
		}
		st.cp = st.cp<<6 | rune(b&0x3F)
		st.need--
		if st.need == 0 {
			c := st.cp
			if c < [5]rune{0, 0, 0x80, 0x800, 0x10000}[st.size] || c > utf8.MaxRune || 0xD800 <= c && c <= 0xDFFF {
				return dead
			}
			return m.advance(st.stacks, c)
		}
	}
	// Mid-character: live only if some stack accepts a character that
	// starts with these bytes.
	// The range is clamped to the code points of the sequence's length,
	// so an overlong start (E0 80) or one past U+10FFFF is dead at once.
	lo := st.cp << (6 * rune(st.need))
	hi := lo | (1<<(6*rune(st.need)) - 1)
	lo = max(lo, [5]rune{0, 0, 0x80, 0x800, 0x10000}[st.size])
	hi = min(hi, utf8.MaxRune)
	if lo > hi {
		return dead
	}
	for _, sk := range st.stacks {
		if sk != 0 && m.g.elems[m.pos[sk]].intersects(lo, hi) {
			return m.intern(st)
		}
	}
	return dead
}

// advance is the state after code point c from the stacks.
func (m *Matcher) advance(stacks []int32, c rune) int32 {
	m.set = m.set[:0]
	for _, s := range stacks {
		if s == 0 {
			continue
		}
		p := m.pos[s]
		if !m.g.elems[p].matches(c) {
			continue
		}
		rest := m.next[s]
		if m.g.elems[p+1].kind != kEnd {
			rest = m.push(p+1, rest)
		}
		m.expandInto(rest)
	}
	if m.err != nil {
		return dead
	}
	if len(m.set) == 0 {
		return dead
	}
	return m.intern(state{stacks: m.sortedSet()})
}

// ErrRejected is returned (wrapped) by Accept for text the grammar does
// not allow at that point.
var ErrRejected = errors.New("grammar: text not allowed")

// Accept advances over text (a token's bytes). Text the grammar does not
// allow is an error wrapping ErrRejected and leaves the matcher as it was.
func (m *Matcher) Accept(text []byte) error {
	if m.err != nil {
		return m.err
	}
	s := m.cur
	for i, b := range text {
		if s = m.step(s, b); s == dead {
			if m.err != nil {
				return m.err
			}
			return fmt.Errorf("%w: byte %d of %q", ErrRejected, i, text)
		}
	}
	m.cur = s
	m.trim()
	return nil
}

// AcceptToken advances over the bytes of token id of the matcher's
// vocabulary. A token with no text (a control token) is rejected.
func (m *Matcher) AcceptToken(id int32) error {
	if m.trie == nil || id < 0 || int(id) >= len(m.trie.pieces) {
		return fmt.Errorf("grammar: token %d is not in the vocabulary", id)
	}
	p := m.trie.pieces[id]
	if len(p) == 0 {
		return fmt.Errorf("%w: token %d has no text", ErrRejected, id)
	}
	if err := m.Accept(p); err != nil {
		return fmt.Errorf("token %d: %w", id, err)
	}
	return nil
}

// IsComplete reports whether the text so far is a whole sentence of the
// grammar, so that generation may end here.
func (m *Matcher) IsComplete() bool {
	st := &m.states[m.cur]
	return st.need == 0 && len(st.stacks) > 0 && st.stacks[0] == 0
}

// Done reports whether the text is complete and nothing may follow it.
func (m *Matcher) Done() bool {
	st := &m.states[m.cur]
	return st.need == 0 && len(st.stacks) == 1 && st.stacks[0] == 0
}

// trim starts the caches afresh when they have grown past their bound,
// keeping only the current state.
func (m *Matcher) trim() {
	if len(m.states) < maxStates && len(m.pos) < 16*maxStates {
		return
	}
	st := m.states[m.cur]
	// Rebuild the current state's stacks in fresh tables.
	var lists [][]int32
	for _, s := range st.stacks {
		var l []int32
		for ; s != 0; s = m.next[s] {
			l = append(l, m.pos[s])
		}
		lists = append(lists, l)
	}
	m.reset()
	var stacks []int32
	for _, l := range lists {
		s := int32(0)
		for i := len(l) - 1; i >= 0; i-- {
			s = m.push(l[i], s)
		}
		stacks = append(stacks, s)
	}
	slices.Sort(stacks)
	st.stacks = stacks
	m.cur = m.intern(st)
}

// unknownRow is a new state's transitions: none computed yet.
var unknownRow = func() (r [256]int32) {
	for i := range r {
		r[i] = -1
	}
	return r
}()

// Err is why the matcher stopped (ErrAmbiguous), or nil.
func (m *Matcher) Err() error { return m.err }
