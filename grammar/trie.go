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
	nodes  []tnode
	// more holds the tokens after the first of a node that ends several
	// (pieces spelled twice), by node.
	more   map[int32][]int32
	maxLen int
}

// tnode is a node of the tree, in depth-first order: its byte, its depth
// (1 for a first byte), the node after its subtree, and the token that
// ends there (-1: none).
type tnode struct {
	skip  int32
	tok   int32
	depth uint16
	b     byte
	more  bool
}

// NewTrie builds the tree of pieces[id], the bytes each token stands for.
// Pieces longer than 65535 bytes are left out.
func NewTrie(pieces [][]byte) *Trie {
	t := &Trie{pieces: pieces, more: map[int32][]int32{}}
	ids := make([]int32, 0, len(pieces))
	for id, p := range pieces {
		if len(p) > 0 && len(p) <= 0xFFFF {
			ids = append(ids, int32(id))
		}
	}
	slices.SortStableFunc(ids, func(a, b int32) int { return bytes.Compare(pieces[a], pieces[b]) })
	var prev []byte
	var open []int32 // the nodes on the path to the last one
	for _, id := range ids {
		p := pieces[id]
		t.maxLen = max(t.maxLen, len(p))
		if bytes.Equal(p, prev) {
			last := int32(len(t.nodes) - 1)
			t.nodes[last].more = true
			t.more[last] = append(t.more[last], id)
			continue
		}
		lcp := 0
		for lcp < len(p) && lcp < len(prev) && p[lcp] == prev[lcp] {
			lcp++
		}
		// Close the nodes below the common prefix.
		for len(open) > lcp {
			t.nodes[open[len(open)-1]].skip = int32(len(t.nodes))
			open = open[:len(open)-1]
		}
		for d := lcp; d < len(p); d++ {
			open = append(open, int32(len(t.nodes)))
			t.nodes = append(t.nodes, tnode{b: p[d], depth: uint16(d + 1), tok: -1})
		}
		t.nodes[len(t.nodes)-1].tok = id
		prev = p
	}
	for _, n := range open {
		t.nodes[n].skip = int32(len(t.nodes))
	}
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
// have no text): they may come when IsComplete. A matcher that stopped (Err)
// allows nothing.
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
	nodes := t.nodes
	for i := 0; i < len(nodes); {
		nd := &nodes[i]
		s := stk[nd.depth-1]
		ns := m.trans[s>>chunkBits][(s&chunkMask)<<8|int32(nd.b)]
		if ns < 0 {
			ns = m.step(s, nd.b)
		}
		if ns == dead {
			i = int(nd.skip)
			continue
		}
		stk[nd.depth] = ns
		if id := nd.tok; id >= 0 {
			mask[id>>6] |= 1 << (uint(id) & 63)
			if nd.more {
				for _, id := range t.more[int32(i)] {
					mask.set(id)
				}
			}
		}
		i++
	}
	if m.err != nil {
		clear(mask)
		return
	}
	if len(m.masks) >= maxMasks {
		clear(m.masks)
	}
	m.masks[m.cur] = slices.Clone(mask)
}
