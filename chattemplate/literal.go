package chattemplate

import (
	"cmp"
	"context"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode"

	"github.com/glint-llm/glint/internal/jinja"
	"github.com/glint-llm/glint/tokenizer"
)

// Prompt is a conversation rendered for a model's tokenizer.
type Prompt struct {
	// Text is the template's output, byte for byte what Render gives.
	Text string
	// Literal are byte ranges of Text that the messages wrote and that
	// spell a control token, wholly or, at a string's edge, in part: they
	// are tokenized as text, so that a message cannot forge a turn.
	Literal [][2]int
}

// RenderPrompt renders the conversation as Render does, marking where the
// messages' strings (contents, text parts, tool-call arguments, names, keys:
// every string inside Messages) spell the control tokens of tok
// (tok.SpecialTexts), or at a string's edge part of one. Unless specialInContent, those are tokenized as text,
// as OpenAI's API does and llama.cpp's parse_special=false; the template's
// own control tokens stay tokens. Text that a template computes from a
// message (lowercasing it, say) is not marked.
//
// The marking is done by replacing each such span, before rendering, by a
// private-use sentinel (U+E000, a nonce of the render, its index, U+E001)
// and, after, the sentinels by their text; the sentinel characters a message holds are
// escaped the same way, so a message cannot forge one. A sentinel the
// template breaks or writes itself is kept as it stands.
func (t *Template) RenderPrompt(ctx context.Context, tok *tokenizer.Tokenizer, in Input, specialInContent bool) (Prompt, error) {
	msgs, err := messagesValue(in.Messages)
	if err != nil {
		return Prompt{}, err
	}
	var e *escaper
	if !specialInContent && tok != nil {
		e = &escaper{set: specialsOf(tok), index: map[string]int{}}
		msgs = e.value(msgs)
	}
	text, err := t.render(ctx, in, msgs)
	if err != nil || e == nil || len(e.table) == 0 {
		return Prompt{Text: text}, err
	}
	return e.unescape(text), nil
}

// Encode tokenizes the prompt; start says it opens the conversation. The
// template writes BOS itself where the model wants one (transformers
// tokenizes its output without adding specials), so BOS is added only at
// the start and only when the template did not write it: once, never twice.
func (p Prompt) Encode(t *tokenizer.Tokenizer, start bool) []int32 {
	ids := t.EncodeProtected(p.Text, false, p.Literal)
	if start && t.AddBOS() && t.BOS() >= 0 && (len(ids) == 0 || ids[0] != t.BOS()) {
		ids = append([]int32{t.BOS()}, ids...)
	}
	return ids
}

// From is the prompt's text from byte off on, with its literal ranges.
func (p Prompt) From(off int) Prompt {
	off = min(max(off, 0), len(p.Text))
	out := Prompt{Text: p.Text[off:]}
	for _, r := range p.Literal {
		a, b := max(r[0]-off, 0), min(r[1]-off, len(out.Text))
		if a < b {
			out.Literal = append(out.Literal, [2]int{a, b})
		}
	}
	return out
}

const (
	sentinelOpen  = "\uE000"
	sentinelClose = "\uE001"
)

// specialSet indexes a tokenizer's special texts by their first and last
// bytes.
type specialSet struct {
	byFirst, byLast [256][]string
	maxLen          int
}

var specialSets sync.Map // *tokenizer.Tokenizer → *specialSet

func specialsOf(tok *tokenizer.Tokenizer) *specialSet {
	if s, ok := specialSets.Load(tok); ok {
		return s.(*specialSet)
	}
	s := &specialSet{}
	for _, text := range tok.SpecialTexts() { // longest first
		if text == "" {
			continue
		}
		s.byFirst[text[0]] = append(s.byFirst[text[0]], text)
		s.byLast[text[len(text)-1]] = append(s.byLast[text[len(text)-1]], text)
		s.maxLen = max(s.maxLen, len(text))
	}
	actual, _ := specialSets.LoadOrStore(tok, s)
	return actual.(*specialSet)
}

// spans lists the byte ranges of s to keep literal, in order, possibly
// overlapping: every special text and sentinel character in s, and at each
// end of s (and of s without its surrounding white space, which templates
// often trim) the longest part of a special text that text around s could
// complete.
func (ss *specialSet) spans(s string) [][2]int {
	var out [][2]int
	for i := 0; i < len(s); {
		if s[i] == sentinelOpen[0] && (strings.HasPrefix(s[i:], sentinelOpen) || strings.HasPrefix(s[i:], sentinelClose)) {
			out = append(out, [2]int{i, i + len(sentinelOpen)})
			i += len(sentinelOpen)
			continue
		}
		n := 0
		for _, sp := range ss.byFirst[s[i]] {
			if strings.HasPrefix(s[i:], sp) {
				n = len(sp)
				break
			}
		}
		if n > 0 {
			out = append(out, [2]int{i, i + n})
			i += n
			continue
		}
		i++
	}
	lo := len(s) - len(strings.TrimLeftFunc(s, unicode.IsSpace))
	hi := len(strings.TrimRightFunc(s, unicode.IsSpace))
	for _, v := range [][2]int{{0, len(s)}, {lo, max(lo, hi)}} {
		view := s[v[0]:v[1]]
		if k := ss.headSuffix(view); k > 0 {
			out = append(out, [2]int{v[0], v[0] + k})
		}
		if k := ss.tailPrefix(view); k > 0 {
			out = append(out, [2]int{v[1] - k, v[1]})
		}
	}
	return out
}

// headSuffix is the length of the longest start of s that is a proper
// suffix of a special text (text before s could complete it), or 0.
func (ss *specialSet) headSuffix(s string) int {
	for k := min(len(s), ss.maxLen-1); k > 0; k-- {
		for _, sp := range ss.byLast[s[k-1]] {
			if len(sp) > k && strings.HasSuffix(sp, s[:k]) {
				return k
			}
		}
	}
	return 0
}

// tailPrefix is the length of the longest end of s that is a proper prefix
// of a special text (text after s could complete it), or 0.
func (ss *specialSet) tailPrefix(s string) int {
	for k := min(len(s), ss.maxLen-1); k > 0; k-- {
		for _, sp := range ss.byFirst[s[len(s)-k]] {
			if len(sp) > k && strings.HasPrefix(sp, s[len(s)-k:]) {
				return k
			}
		}
	}
	return 0
}

// escaper replaces the literal spans of the messages' strings by sentinels
// and puts them back after rendering.
type escaper struct {
	set   *specialSet
	table []string // a sentinel's index → its text
	index map[string]int
	// nonce opens every sentinel of one render, so that one the template
	// writes itself is not taken for one of them.
	nonce string
}

// value escapes the strings inside v, a fresh value of messagesValue's that
// it may change in place.
func (e *escaper) value(v jinja.Value) jinja.Value {
	switch {
	case v.IsString():
		if s, ok := e.str(v.AsString()); ok {
			return jinja.NewString(s)
		}
	case v.IsList():
		items := v.AsList().Items
		for i := range items {
			items[i] = e.value(items[i])
		}
	case v.IsDict():
		d := v.AsDict()
		rekey := false
		for _, k := range d.Keys {
			d.Data[k] = e.value(d.Data[k])
			_, changed := e.str(k)
			rekey = rekey || changed
		}
		if rekey {
			nd := jinja.NewDict()
			for _, k := range d.Keys {
				nk, _ := e.str(k)
				nd.AsDict().Set(nk, d.Data[k])
			}
			return nd
		}
	}
	return v
}

// str replaces each union of s's overlapping spans by one sentinel; ok
// says it changed s.
func (e *escaper) str(s string) (string, bool) {
	spans := e.set.spans(s)
	if len(spans) == 0 {
		return s, false
	}
	slices.SortFunc(spans, func(a, b [2]int) int { return cmp.Compare(a[0], b[0]) })
	var b strings.Builder
	done := 0
	for i := 0; i < len(spans); {
		a, end := spans[i][0], spans[i][1]
		for i++; i < len(spans) && spans[i][0] < end; i++ {
			end = max(end, spans[i][1])
		}
		a = max(a, done)
		b.WriteString(s[done:a])
		lit := s[a:end]
		if e.nonce == "" {
			e.nonce = strconv.FormatUint(rand.Uint64(), 36) + ":"
		}
		idx, ok := e.index[lit]
		if !ok {
			idx = len(e.table)
			e.table = append(e.table, lit)
			e.index[lit] = idx
		}
		b.WriteString(sentinelOpen)
		b.WriteString(e.nonce)
		b.WriteString(strconv.Itoa(idx))
		b.WriteString(sentinelClose)
		done = end
	}
	b.WriteString(s[done:])
	return b.String(), true
}

// unescape puts the sentinels' texts back, recording where.
func (e *escaper) unescape(text string) Prompt {
	var p Prompt
	var b strings.Builder
	for {
		j := strings.Index(text, sentinelOpen)
		if j < 0 {
			break
		}
		b.WriteString(text[:j])
		if idx, n, ok := e.sentinel(text[j:]); ok {
			start := b.Len()
			b.WriteString(e.table[idx])
			p.Literal = append(p.Literal, [2]int{start, b.Len()})
			text = text[j+n:]
			continue
		}
		b.WriteString(sentinelOpen)
		text = text[j+len(sentinelOpen):]
	}
	b.WriteString(text)
	p.Text = b.String()
	return p
}

// sentinel reads one of this render's sentinels at the start of s: its
// index and length.
func (e *escaper) sentinel(s string) (idx, n int, ok bool) {
	rest, ok := strings.CutPrefix(s, sentinelOpen+e.nonce)
	if !ok {
		return 0, 0, false
	}
	d := 0
	for d < len(rest) && d < 10 && '0' <= rest[d] && rest[d] <= '9' {
		d++
	}
	idx, err := strconv.Atoi(rest[:d])
	if err != nil || idx >= len(e.table) || strconv.Itoa(idx) != rest[:d] || !strings.HasPrefix(rest[d:], sentinelClose) {
		return 0, 0, false
	}
	return idx, len(s) - len(rest) + d + len(sentinelClose), true
}
