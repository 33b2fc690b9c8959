package tokenizer

import "math"

// symbol is one element of the doubly linked list both merge loops work on:
// the bytes s[start:start+n] of the text being tokenized. A symbol merged
// into its left neighbour has n == 0. The fields are 32 bits (the merge
// queue keys already hold indices in 32): a prompt of millions of
// characters is a list of millions of symbols, and 64-bit fields doubled it.
type symbol struct {
	prev, next int32
	start, n   int32
}

// text is the symbol's bytes of s.
func (y symbol) text(s string) string { return s[y.start : y.start+y.n] }

// utf8Len is llama.cpp's unicode_len_utf8: the sequence length announced by
// a lead byte (continuation bytes count as 1).
func utf8Len(b byte) int {
	return [16]int{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4}[b>>4]
}

// splitChars makes one symbol per UTF-8 character of s, the way llama.cpp
// splits (a truncated sequence at the end is one short symbol).
func splitChars(s string) []symbol {
	syms := make([]symbol, 0, len(s))
	for off := 0; off < len(s); {
		n := min(utf8Len(s[off]), len(s)-off)
		i := len(syms)
		next := i + 1
		if off+n == len(s) {
			next = -1
		}
		syms = append(syms, symbol{prev: int32(i - 1), next: int32(next), start: int32(off), n: int32(n)})
		off += n
	}
	return syms
}

// bigram is a candidate merge of the adjacent symbols left and right. key
// orders the queue (smallest first) and ends in the left index, so that
// ties go to the leftmost pair as in llama.cpp.
type bigram struct {
	key   uint64
	right int32
	size  int32 // bytes of the merged text, to spot stale entries
}

// bigramQueue is a binary min-heap of bigrams.
type bigramQueue []bigram

func (h *bigramQueue) push(x bigram) {
	q := append(*h, x)
	i := len(q) - 1
	for i > 0 {
		p := (i - 1) / 2
		if q[p].key <= q[i].key {
			break
		}
		q[i], q[p] = q[p], q[i]
		i = p
	}
	*h = q
}

func (h *bigramQueue) pop() bigram {
	q := *h
	top := q[0]
	last := len(q) - 1
	q[0] = q[last]
	q = q[:last]
	for i := 0; ; {
		l, r, m := 2*i+1, 2*i+2, i
		if l < last && q[l].key < q[m].key {
			m = l
		}
		if r < last && q[r].key < q[m].key {
			m = r
		}
		if m == i {
			break
		}
		q[i], q[m] = q[m], q[i]
		i = m
	}
	*h = q
	return top
}

// scoreKey orders SentencePiece scores highest first: the float's bits
// made to sort as unsigned integers, then inverted.
func scoreKey(score float32, left int) uint64 {
	if score == 0 {
		score = 0 // -0 ties with +0, as the C++ comparison has it
	}
	b := math.Float32bits(score)
	if b&0x80000000 != 0 {
		b = ^b
	} else {
		b |= 0x80000000
	}
	return uint64(^b)<<32 | uint64(uint32(left))
}

// encodeSPM is llama.cpp's llm_tokenizer_spm_session::tokenize: merge the
// adjacent pair whose concatenation is the token of highest score (leftmost
// on ties) until none is left, then emit the symbols, spelling those that
// are not tokens as byte tokens.
func (t *Tokenizer) encodeSPM(s string, out []int32) []int32 {
	syms := splitChars(s)
	if len(syms) == 0 {
		return out
	}
	// Every adjacent pair may be a merge: room for them at once, not by
	// doubling (a long prompt'"'"'s queue is as long as its characters).
	q := make(bigramQueue, 0, len(syms))
	revMerge := map[string][2]int{}
	tryAdd := func(l, r int) {
		if l < 0 || r < 0 {
			return
		}
		text := s[syms[l].start : syms[l].start+syms[l].n+syms[r].n]
		id, ok := t.toID[text]
		if !ok {
			return
		}
		q.push(bigram{key: scoreKey(t.scores[id], l), right: int32(r), size: int32(len(text))})
		revMerge[text] = [2]int{l, r}
	}
	for i := 1; i < len(syms); i++ {
		tryAdd(i-1, i)
	}
	for len(q) > 0 {
		b := q.pop()
		left := int(uint32(b.key))
		l, r := &syms[left], &syms[b.right]
		if l.n == 0 || r.n == 0 || l.n+r.n != b.size {
			continue
		}
		l.n += r.n
		r.n = 0
		l.next = r.next
		if r.next >= 0 {
			syms[r.next].prev = int32(left)
		}
		tryAdd(int(l.prev), left)
		tryAdd(left, int(l.next))
	}
	var reseg func(i int)
	reseg = func(i int) {
		text := syms[i].text(s)
		if id, ok := t.toID[text]; ok {
			out = append(out, id)
			return
		}
		if p, ok := revMerge[text]; ok {
			reseg(p[0])
			reseg(p[1])
			return
		}
		out = t.appendBytes(out, text)
	}
	for i := 0; i != -1; i = int(syms[i].next) {
		reseg(i)
	}
	return out
}

// appendBytes spells text as byte tokens; a byte without one becomes the
// unknown token (llama.cpp would throw), or is dropped when there is none.
func (t *Tokenizer) appendBytes(out []int32, text string) []int32 {
	for i := 0; i < len(text); i++ {
		switch id := t.byteTok[text[i]]; {
		case id >= 0:
			out = append(out, id)
		case t.unk >= 0:
			out = append(out, t.unk)
		}
	}
	return out
}

// encodeSPMBPE is Hugging Face's BPE model over "▁"-escaped text: merges by
// rank, then characters that are not tokens fall back to byte tokens.
func (t *Tokenizer) encodeSPMBPE(s string, out []int32) []int32 {
	words := []string{s}
	if t.splitMeta {
		words = splitBeforeMark(s)
	}
	for _, w := range words {
		if t.ignoreMerges {
			if id, ok := t.toID[w]; ok {
				out = append(out, id)
				continue
			}
		}
		for _, sym := range t.bpeWord(w) {
			text := sym.text(w)
			if id, ok := t.toID[text]; ok {
				out = append(out, id)
				continue
			}
			if t.byteFallback {
				out = t.appendBytes(out, text)
			} else if t.unk >= 0 {
				out = append(out, t.unk)
			}
		}
	}
	return out
}

// splitBeforeMark splits s before every "▁" (HF Metaspace with split).
func splitBeforeMark(s string) []string {
	var words []string
	start := 0
	for i := 1; i < len(s); i++ {
		if s[i] == spaceMark[0] && len(s)-i >= len(spaceMark) && s[i:i+len(spaceMark)] == spaceMark {
			words = append(words, s[start:i])
			start = i
		}
	}
	if start < len(s) {
		words = append(words, s[start:])
	}
	return words
}
