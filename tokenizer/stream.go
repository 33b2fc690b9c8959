package tokenizer

import (
	"strings"
	"unicode/utf8"
)

// StreamDecoder turns generated tokens into text as they arrive. A
// character split over several tokens (an emoji spelled as byte tokens, a
// byte-level BPE token ending mid-character) is held back until it is
// complete, so every string returned is valid UTF-8.
type StreamDecoder struct {
	t       *Tokenizer
	pending []byte
}

// NewStreamDecoder starts an empty stream.
func (t *Tokenizer) NewStreamDecoder() *StreamDecoder { return &StreamDecoder{t: t} }

// Add appends one token and returns the text it completes, possibly "".
// Bytes that can never become a character are returned as U+FFFD.
func (d *StreamDecoder) Add(id int32) string {
	d.pending = append(d.pending, d.t.Piece(id)...)
	// Keep back a trailing sequence that is the start of a character.
	keep := 0
	for i := len(d.pending) - 1; i >= 0 && i >= len(d.pending)-utf8.UTFMax; i-- {
		b := d.pending[i]
		if b < 0x80 {
			break
		}
		if b >= 0xC0 { // a lead byte: is the sequence from here unfinished?
			tail := d.pending[i:]
			if !utf8.FullRune(tail) {
				keep = len(tail)
			}
			break
		}
	}
	ready := d.pending[:len(d.pending)-keep]
	s := strings.ToValidUTF8(string(ready), "\uFFFD")
	d.pending = append(d.pending[:0], d.pending[len(d.pending)-keep:]...)
	return s
}

// Flush returns whatever is held back (an unfinished character becomes
// U+FFFD) and empties the stream.
func (d *StreamDecoder) Flush() string {
	s := strings.ToValidUTF8(string(d.pending), "\uFFFD")
	d.pending = d.pending[:0]
	return s
}
