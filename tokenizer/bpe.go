package tokenizer

import (
	"strings"
	"unicode/utf8"
)

// GPT-2's reversible byte→character table: printable Latin-1 bytes stand
// for themselves, the others for U+0100 onwards, so every byte string is a
// string of visible characters (openai/gpt-2 encoder.py bytes_to_unicode).
var (
	byteToRune [256]rune
	byteToStr  [256]string
	runeToByte = map[rune]byte{}
)

func init() {
	n := 0
	for b := 0; b < 256; b++ {
		if ('!' <= b && b <= '~') || (0xA1 <= b && b <= 0xAC) || (0xAE <= b && b <= 0xFF) {
			byteToRune[b] = rune(b)
		} else {
			byteToRune[b] = rune(256 + n)
			n++
		}
		byteToStr[b] = string(byteToRune[b])
		runeToByte[byteToRune[b]] = byte(b)
	}
}

// byteLevelDecode maps a byte-level token back to its bytes. A character
// outside the table stands for its own UTF-8 bytes (as Hugging Face's
// ByteLevel decoder does; llama.cpp would print a marker instead).
func byteLevelDecode(s string) []byte {
	out := make([]byte, 0, len(s))
	for _, r := range s {
		if b, ok := runeToByte[r]; ok {
			out = append(out, b)
		} else {
			out = utf8.AppendRune(out, r)
		}
	}
	return out
}

// rank returns the merge rank of two adjacent symbols with texts a and b
// and token ids ia and ib (-1 when not a token).
func (t *Tokenizer) rank(a, b string, ia, ib int32) (int32, bool) {
	if ia >= 0 && ib >= 0 {
		r, ok := t.ranksByID[uint64(uint32(ia))<<32|uint64(uint32(ib))]
		return r, ok
	}
	if len(t.ranksByText) == 0 {
		return 0, false
	}
	r, ok := t.ranksByText[[2]string{a, b}]
	return r, ok
}

// bpeWord merges the characters of word by rank, lowest first and leftmost
// on ties (llama.cpp llm_tokenizer_bpe_session::tokenize), and returns the
// surviving symbols in order.
func (t *Tokenizer) bpeWord(word string) []symbol {
	syms := splitChars(word)
	ids := make([]int32, len(syms))
	text := func(i int) string { return syms[i].text(word) }
	for i := range syms {
		ids[i] = t.lookup(text(i))
	}
	q := make(bigramQueue, 0, len(syms))
	add := func(l, r int) {
		if l < 0 || r < 0 {
			return
		}
		rank, ok := t.rank(text(l), text(r), ids[l], ids[r])
		if !ok {
			return
		}
		q.push(bigram{key: uint64(uint32(rank))<<32 | uint64(uint32(l)), right: int32(r), size: syms[l].n + syms[r].n})
	}
	for i := 1; i < len(syms); i++ {
		add(i-1, i)
	}
	for len(q) > 0 {
		b := q.pop()
		left := int(uint32(b.key))
		l, r := &syms[left], &syms[b.right]
		// Stale entries: a side was merged away or grew since the push.
		if l.n == 0 || r.n == 0 || l.next != b.right || l.n+r.n != b.size {
			continue
		}
		l.n += r.n
		r.n = 0
		l.next = r.next
		if r.next >= 0 {
			syms[r.next].prev = int32(left)
		}
		ids[left] = t.lookup(text(left))
		add(int(l.prev), left)
		add(left, int(l.next))
	}
	out := syms[:0]
	for i := 0; len(syms) > 0 && i != -1; i = int(syms[i].next) {
		out = append(out, syms[i])
	}
	return out
}

// lookup is the id of a token text, or -1.
func (t *Tokenizer) lookup(s string) int32 {
	if id, ok := t.toID[s]; ok {
		return id
	}
	return -1
}

// encodeBPE tokenizes one text fragment with a byte-level vocabulary:
// pre-tokenize, map each word's bytes to GPT-2 characters, merge by rank.
func (t *Tokenizer) encodeBPE(s string, out []int32) []int32 {
	runes := []rune(s)
	var enc strings.Builder
	var buf [utf8.UTFMax]byte
	for _, w := range t.pre.split(runes) {
		enc.Reset()
		for _, r := range runes[w[0]:w[1]] {
			n := utf8.EncodeRune(buf[:], r)
			for _, b := range buf[:n] {
				enc.WriteString(byteToStr[b])
			}
		}
		word := enc.String()
		if t.ignoreMerges {
			if id, ok := t.toID[word]; ok {
				out = append(out, id)
				continue
			}
		}
		for _, sym := range t.bpeWord(word) {
			piece := sym.text(word)
			if id, ok := t.toID[piece]; ok {
				out = append(out, id)
				continue
			}
			// llama.cpp's fallback: look the piece up byte by byte and keep
			// what matches (GPT-2 characters are never single bytes above
			// 0x7F, so this only rescues ASCII).
			for i := 0; i < len(piece); i++ {
				if id, ok := t.toID[piece[i:i+1]]; ok {
					out = append(out, id)
				}
			}
		}
	}
	return out
}
