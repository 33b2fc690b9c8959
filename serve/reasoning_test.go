package serve

import (
	"math/rand/v2"
	"strings"
	"testing"
)

var thinkCases = []struct {
	name, reply string
	opened      bool // the prompt opened the block
	reasoning   string
	content     string
}{
	{"block", "<think>\nI think.\n</think>\n\nHello", false, "I think.", "Hello"},
	{"spaces before", "  \n<think>a</think>b", false, "a", "b"},
	{"empty block", "<think>\n\n</think>\n\nHi", false, "", "Hi"},
	{"nothing after", "<think>a</think>", false, "a", ""},
	{"not at the start", "Hello <think>x</think> y", false, "", "Hello <think>x</think> y"},
	{"close without open", "a</think>b", false, "", "a</think>b"},
	{"leading space kept", "\n\nHello", false, "", "\n\nHello"},
	{"a tag's start only", "<thin", false, "", "<thin"},
	{"near tags inside", "<think>a </ think> b<</think>c", false, "a </ think> b<", "c"},
	{"unclosed", "<think>still thinking </thi", false, "still thinking </thi", ""},
	{"unclosed spaces", "<think> x \n\n", false, "x", ""},
	{"second block is content", "<think>a</think>b<think>c</think>", false, "a", "b<think>c</think>"},
	{"multibyte", "<think>é…\n</think>\nü", false, "é…", "ü"},
	{"opened", "reason\n</think>\n\nanswer", true, "reason", "answer"},
	{"opened, open again", "<think>\nreason</think>ans", true, "reason", "ans"},
	{"opened, unclosed", "  just thinking", true, "just thinking", ""},
	{"opened, empty", "", true, "", ""},
	{"opened, a tag's start", "<th", true, "<th", ""},
	{"inner spaces kept", "<think>a\n\n b</think> c \n", false, "a\n\n b", "c \n"},
}

// splitAll feeds reply to a splitter in the given pieces and joins what
// it sends.
func splitAll(pieces []string, opened bool) (reasoning, content string) {
	t := &ThinkSplit{opened: opened}
	var r, c strings.Builder
	for _, p := range pieces {
		a, b := t.Feed(p)
		r.WriteString(a)
		c.WriteString(b)
	}
	a, b := t.Flush()
	r.WriteString(a)
	c.WriteString(b)
	return r.String(), c.String()
}

func TestThinkSplit(t *testing.T) {
	for _, tc := range thinkCases {
		t.Run(tc.name, func(t *testing.T) {
			check := func(pieces []string) {
				t.Helper()
				r, c := splitAll(pieces, tc.opened)
				if r != tc.reasoning || c != tc.content {
					t.Fatalf("pieces %q: reasoning %q, content %q; want %q, %q", pieces, r, c, tc.reasoning, tc.content)
				}
			}
			check([]string{tc.reply})
			// Every cut in two, then three, and byte by byte: a stream's
			// pieces may end anywhere, inside a tag or a character.
			for i := 0; i <= len(tc.reply); i++ {
				check([]string{tc.reply[:i], tc.reply[i:]})
				for j := i; j <= len(tc.reply); j++ {
					check([]string{tc.reply[:i], tc.reply[i:j], tc.reply[j:]})
				}
			}
			check(strings.Split(tc.reply, ""))
		})
	}
}

// TestThinkSplitStreamsEarly: reasoning and content are sent as they come,
// not held to the end: only a possible tag and trailing spaces wait.
func TestThinkSplitStreamsEarly(t *testing.T) {
	s := &ThinkSplit{}
	for _, step := range []struct{ in, r, c string }{
		{"<thi", "", ""},
		{"nk>\nFirst", "First", ""},
		{" step ", " step", ""},
		{"</th", "", ""},
		{"ink>", "", ""},
		{"\n\n", "", ""},
		{"Answer", "", "Answer"},
		{" more", "", " more"},
	} {
		r, c := s.Feed(step.in)
		if r != step.r || c != step.c {
			t.Fatalf("feed %q: %q, %q; want %q, %q", step.in, r, c, step.r, step.c)
		}
	}
}

func TestOpensThink(t *testing.T) {
	for prompt, want := range map[string]bool{
		"<｜Assistant｜><think>\n":                                true,
		"<|im_start|>assistant\n<think>\n":                      true,
		"<|im_start|>assistant\n<think>\n\n</think>\n\n":        false, // Qwen3, enable_thinking false
		"<|start_header_id|>assistant<|end_header_id|>\n\n":     false,
		"<think>\nan earlier reply's</think>\n<|im_start|>user": false,
	} {
		if got := opensThink(prompt); got != want {
			t.Errorf("opensThink(%q) = %v, want %v", prompt, got, want)
		}
	}
}

func TestParseReasoningFormat(t *testing.T) {
	for in, want := range map[string]ReasoningFormat{"": ReasoningDeepSeek, "auto": ReasoningDeepSeek, "deepseek": ReasoningDeepSeek, "none": ReasoningNone} {
		if got, err := ParseReasoningFormat(in); err != nil || got != want {
			t.Errorf("ParseReasoningFormat(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := ParseReasoningFormat("deepseek-legacy"); err == nil || !strings.Contains(err.Error(), "deepseek-legacy") {
		t.Errorf("an unknown format: %v, want an error naming it", err)
	}
}

// refSplit is llama.cpp's DeepSeek-R1 parse, for a reply that opens its
// block (or whose prompt did): one regular expression over the whole text.
func refSplit(s string, opened bool) (string, string) {
	open := strings.TrimLeft(s, spaces)
	if after, ok := strings.CutPrefix(open, thinkOpen); ok {
		s = after
	} else if !opened {
		return "", s
	}
	if r, c, ok := strings.Cut(s, thinkClose); ok {
		return strings.Trim(r, spaces), strings.TrimLeft(c, spaces)
	}
	return strings.Trim(s, spaces), ""
}

// FuzzThinkSplit: any reply cut anywhere splits as the whole reply does,
// and as the one-pass reference does.
func FuzzThinkSplit(f *testing.F) {
	for _, tc := range thinkCases {
		f.Add(tc.reply, tc.opened, uint64(len(tc.reply)))
	}
	f.Fuzz(func(t *testing.T, reply string, opened bool, seed uint64) {
		wr, wc := refSplit(reply, opened)
		if r, c := splitAll([]string{reply}, opened); r != wr || c != wc {
			t.Fatalf("%q: %q, %q; the reference %q, %q", reply, r, c, wr, wc)
		}
		rng := rand.New(rand.NewPCG(seed, 1))
		var pieces []string
		for rest := reply; rest != ""; {
			n := 1 + rng.IntN(len(rest))
			pieces, rest = append(pieces, rest[:n]), rest[n:]
		}
		if r, c := splitAll(pieces, opened); r != wr || c != wc {
			t.Fatalf("%q in %q: %q, %q; the reference %q, %q", reply, pieces, r, c, wr, wc)
		}
	})
}
