package grammar

import (
	"bytes"
	"slices"
	"sync"

	"github.com/glint-llm/glint/tokenizer"
)

// Trie is a vocabulary as a prefix tree of its tokens' bytes, laid out in
// depth-first order so that a mask is one forward pass that skips the
// subtrees the grammar rules out. Tokens with no text (control, unknown,
// unused) are not in it: a grammar never allows them. It is immutable and
// shared by every Matcher over the vocabulary.
type Trie struct {
	pieces [][]byte
	// Per node, in depth-first order: its byte, its depth (1 for a first
	// byte), the node after its subtree, and the tokens that end there
	// (toks[tokOff[i]:tokOff[i+1]]).
	b      []byte
	depth  []int32
	skip   []int32
	tokOff []int32
	toks   []int32
	maxLen int
}

// NewTrie builds the tree of pieces[id], the bytes each token stands for.
func NewTrie(pieces [][]byte) *Trie {
	t := &Trie{pieces: pieces}
	ids := make([]int32, 0, len(pieces))
	for id, p := range pieces {
		if len(p) > 0 {
			ids = append(ids, int32(id))
		}
	}
	slices.SortStableFunc(ids, func(a, b int32) int { return bytes.Compare(pieces[a], pieces[b]) })
	var prev []byte
	var open []int32 // the nodes on the path to the last one
	for _, id := range ids {
		p := pieces[id]
		t.maxLen = max(t.maxLen, len(p))
		lcp := 0
		for lcp < len(p) && lcp < len(prev) && p[lcp] == prev[lcp] {
			lcp++
		}
		// Close the nodes below the common prefix.
		for len(open) > lcp {
			t.skip[open[len(open)-1]] = int32(len(t.b))
			open = open[:len(open)-1]
		}
		for d := lcp; d < len(p); d++ {
			open = append(open, int32(len(t.b)))
			t.b = append(t.b, p[d])
			t.depth = append(t.depth, int32(d+1))
			t.skip = append(t.skip, 0)
			t.tokOff = append(t.tokOff, int32(len(t.toks)))
		}
		t.toks = append(t.toks, id)
		prev = p
	}
	for _, n := range open {
		t.skip[n] = int32(len(t.b))
	}
	t.tokOff = append(t.tokOff, int32(len(t.toks)))
	return t
}

// Size is the number of tokens the masks cover (the vocabulary's size).
func (t *Trie) Size() int { return len(t.pieces) }

var tries sync.Map // *tokenizer.Tokenizer → *Trie

// TrieFor is the trie of a tokenizer's vocabulary (tokenizer.Piece of
// each id), built once per tokenizer.
func TrieFor(tok *tokenizer.Tokenizer) *Trie {
	if t, ok := tries.Load(tok); ok {
		return t.(*Trie)
	}
	pieces := make([][]byte, tok.VocabSize())
	for id := range pieces {
		pieces[id] = tok.Piece(int32(id))
	}
	t, _ := tries.LoadOrStore(tok, NewTrie(pieces))
	return t.(*Trie)
}

// Mask is a set of token ids, a bit each.
type Mask []uint64

// NewMask is an empty mask for n tokens.
func NewMask(n int) Mask { return make(Mask, (n+63)/64) }

// Has reports whether id is in the mask.
func (k Mask) Has(id int32) bool {
	return id >= 0 && int(id>>6) < len(k) && k[id>>6]>>(uint(id)&63)&1 != 0
}

func (k Mask) set(id int32) { k[id>>6] |= 1 << (uint(id) & 63) }

// Allowed fills mask (of the trie's size, NewMask) with the tokens whose
// whole text the grammar allows next. End tokens are not among them (they
// have no text): they may come when IsComplete.
func (m *Matcher) Allowed(mask Mask) {
	if k, ok := m.masks[m.cur]; ok {
		copy(mask, k)
		return
	}
	clear(mask)
	t := m.trie
	if t == nil {
		return
	}
	if len(m.walk) < t.maxLen+1 {
		m.walk = make([]int32, t.maxLen+1)
	}
	stk := m.walk
	stk[0] = m.cur
	n := int32(len(t.b))
	for i := int32(0); i < n; {
		d := t.depth[i]
		s := stk[d-1]
		ns := m.trans[s][t.b[i]]
		if ns < 0 {
			ns = m.step(s, t.b[i])
		}
		if ns == dead {
			i = t.skip[i]
			continue
		}
		stk[d] = ns
		for _, id := range t.toks[t.tokOff[i]:t.tokOff[i+1]] {
			mask.set(id)
		}
		i++
	}
	if len(m.masks) >= maxMasks {
		clear(m.masks)
	}
	m.masks[m.cur] = slices.Clone(mask)
}
