package grammar

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/glint-llm/glint/internal/shared"
	"github.com/glint-llm/glint/model/gguf"
	"github.com/glint-llm/glint/tokenizer"
)

// arithmetic is a grammar in the style of llama.cpp's arithmetic.gbnf,
// written for this test.
const arithmetic = `# expressions
root  ::= (expr "=" ws term "\n")+
expr  ::= term ([-+*/] term)*
term  ::= ident | num | "(" ws expr ")" ws
ident ::= [a-z] [a-z0-9_]* ws
num   ::= [0-9]+ ws
ws    ::= [ \t\n]*
`

func mustParse(t testing.TB, src string) *Grammar {
	t.Helper()
	g, err := Parse(src)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func TestParseAndMatch(t *testing.T) {
	cases := []struct {
		name, src string
		ok, bad   []string
	}{
		{"arithmetic", arithmetic,
			[]string{"1+2=3\n", "(a +b)*c= x\n", "x=1\ny=2\n"},
			[]string{"1+=3\n", "=3\n", "1+2=3", "A=1\n"}},
		{"repetition", `root ::= "a"{2,3} "b"{2} "c"{1,} "d"{0,1}`,
			[]string{"aabbc", "aaabbcccd"}, []string{"abbc", "aaaabbc", "aabc", "aabbcdd", "aabb"}},
		{"classes", `root ::= [^"\\a-c] [\x41-\x43] . [é-ë] "\u00e9\U0001F600"`,
			[]string{"xAzéé😀", "dC😀ëé😀"}, []string{"aAzéé😀", "\"Azéé😀", "xDzéé😀", "xAzeé😀"}},
		{"empty-alt", `root ::= "x" ( | "y" ) "z"`, []string{"xz", "xyz"}, []string{"xyyz", "x"}},
		{"multiline", "root ::=\n  \"a\" |\n  \"b\" # comment\nunused ::= root \"c\"\n", []string{"a", "b"}, []string{"ab", "c"}},
		{"nested-group", "root ::= (\n  \"a\" (\"b\"\n | \"c\")+\n)*", []string{"", "ab", "abcb", "acab"}, []string{"a", "b"}},
		{"escapes", `root ::= "\"\\\t\n\r\[\]"`, []string{"\"\\\t\n\r[]"}, []string{"x"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := mustParse(t, c.src)
			for _, d := range c.ok {
				if !accepts(g, d) {
					t.Errorf("rejects %q", d)
				}
			}
			for _, d := range c.bad {
				if accepts(g, d) {
					t.Errorf("accepts %q", d)
				}
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	cases := []struct {
		src       string
		line, col int
		msg       string
	}{
		{`root ::= "abc`, 1, 10, "unterminated string"},
		{"root ::= [a-", 1, 10, "unterminated character class"},
		{"root ::= x", 1, 10, `"x" is used but not defined`},
		{"a ::= \"x\"", 1, 10, "no rule named root"},
		{"root ::= \"a\"\nroot ::= \"b\"", 2, 1, "defined twice"},
		{"root = \"a\"", 1, 6, "expected ::="},
		{"root ::= (\"a\"", 1, 14, "expected ')'"},
		{"root ::= *", 1, 10, "nothing before it"},
		{`root ::= "a"{3,2}`, 1, 16, "maximum below its minimum"},
		{`root ::= "a"{2`, 1, 15, "expected ',' or '}'"},
		{`root ::= "\q"`, 1, 11, `unknown escape \q`},
		{`root ::= "\x4"`, 1, 11, "hex digits"},
		{`root ::= [z-a]`, 1, 13, "empty character range"},
		{"root ::= \"a\" )", 1, 14, "expected a newline"},
		{`root ::= "a"{99999}`, 1, 14, "over 10000"},
	}
	for _, c := range cases {
		_, err := Parse(c.src)
		var se *SyntaxError
		if !errors.As(err, &se) {
			t.Errorf("%q: error %v, want a SyntaxError", c.src, err)
			continue
		}
		if se.Line != c.line || se.Col != c.col || !strings.Contains(se.Msg, c.msg) {
			t.Errorf("%q: %v, want line %d col %d %q", c.src, err, c.line, c.col, c.msg)
		}
	}
	for _, src := range []string{"root ::= root \"a\" | \"b\"", "root ::= a\na ::= b? root\nb ::= \"x\""} {
		if _, err := Parse(src); err == nil || !strings.Contains(err.Error(), "left recursion") {
			t.Errorf("%q: %v, want left recursion", src, err)
		}
	}
}

// TestLlamaCppGrammars reads llama.cpp's own example grammars from the
// peer's source tree (internal/peer): .peer/llama.cpp-cpu/grammars in the
// module root, or beside $GLINT_LLAMACPP's build/bin.
func TestLlamaCppGrammars(t *testing.T) {
	dir := filepath.Join("..", ".peer", "llama.cpp-cpu", "grammars")
	if d := os.Getenv("GLINT_LLAMACPP"); d != "" {
		dir = filepath.Join(d, "..", "..", "grammars")
	}
	if _, err := os.Stat(filepath.Join(dir, "json.gbnf")); err != nil {
		t.Skipf("llama.cpp's grammars not found in %s (the peer's source; $GLINT_LLAMACPP/../../grammars)", dir)
	}
	docs := map[string]struct{ ok, bad []string }{
		"json.gbnf":       {[]string{`{"a": [1, 2.5, "x", true, null, {"b": {}}]}`, `{}`}, []string{`{"a" 1}`, `[1]`, `{"a":01}`}},
		"arithmetic.gbnf": {[]string{"1+2=3\n", "(a +b)*c= x\n"}, []string{"1+=3\n", "=3\n"}},
		"list.gbnf":       {[]string{"- milk\n- eggs\n"}, []string{"- \n", "milk\n", "- a\u2028b\n"}},
	}
	for name, d := range docs {
		src, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		g, err := Parse(string(src))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, s := range d.ok {
			if !accepts(g, s) {
				t.Errorf("%s rejects %s", name, s)
			}
		}
		for _, s := range d.bad {
			if accepts(g, s) {
				t.Errorf("%s accepts %s", name, s)
			}
		}
	}
}

// smallVocab has multi-character tokens, UTF-8 split over byte tokens,
// invalid bytes, duplicates and a control token (no text).
func smallVocab() [][]byte {
	var v [][]byte
	for c := 0x20; c < 0x7F; c++ {
		v = append(v, []byte{byte(c)})
	}
	for _, s := range []string{"\n", "\t", `{"`, `":`, `",`, `"}`, `"name`, `"age`, ` "`, `true`, `tru`, `null`, `},`, `{}`, `[]`,
		"12", "007", "-1", "1.5", "é", "ab", "abc", "\n  ", "  ", `\"`, `\u00`, "😀", "\xF0\x9F", "\x98\x80", "\xC3", "\xA9",
		"\xFF", "\xC0\x80", `{"name": "`, `"}` + "\n", "red", `"red"`, `", "`, "", "x"} {
		v = append(v, []byte(s))
	}
	return v
}

// TestMaskMatchesBruteForce walks random paths through grammars and, at
// every state, holds the trie's mask to accepting each token's bytes on a
// fresh matcher that replays the text so far.
func TestMaskMatchesBruteForce(t *testing.T) {
	vocab := smallVocab()
	trie := NewTrie(vocab)
	schema := `{"type":"object","properties":{"name":{"type":"string","maxLength":4},"age":{"type":"integer","minimum":0,"maximum":120},
		"color":{"enum":["red","green"]},"tags":{"type":"array","items":{"type":"string"},"maxItems":2}},"required":["name"],"additionalProperties":false}`
	grammars := map[string]*Grammar{"json": JSONObject(), "arithmetic": mustParse(t, arithmetic), "utf8": mustParse(t, `root ::= ([é😀] | [a-c])+ "."`)}
	g, err := FromJSONSchema([]byte(schema), SchemaOptions{})
	if err != nil {
		t.Fatal(err)
	}
	grammars["schema"] = g
	for name, g := range grammars {
		for seed := range uint64(4) {
			rng := rand.New(rand.NewPCG(seed, 7))
			m := NewMatcher(g, trie)
			var text []byte
			mask := NewMask(len(vocab))
			for step := 0; step < 40; step++ {
				m.Allowed(mask)
				var allowed []int32
				for id, p := range vocab {
					ref := NewMatcher(g, nil)
					if err := ref.Accept(text); err != nil {
						t.Fatalf("%s: replay %q: %v", name, text, err)
					}
					want := len(p) > 0 && ref.Accept(p) == nil
					if got := mask.Has(int32(id)); got != want {
						t.Fatalf("%s seed %d after %q: token %q allowed %v, brute force %v", name, seed, text, p, got, want)
					}
					if want {
						allowed = append(allowed, int32(id))
					}
				}
				if len(allowed) == 0 {
					if !m.IsComplete() {
						t.Fatalf("%s: dead end after %q", name, text)
					}
					break
				}
				id := allowed[rng.IntN(len(allowed))]
				if err := m.AcceptToken(id); err != nil {
					t.Fatal(err)
				}
				text = append(text, vocab[id]...)
			}
		}
	}
}

func TestAcceptRejectsAtomically(t *testing.T) {
	g := mustParse(t, `root ::= "ab" "c"?`)
	m := NewMatcher(g, NewTrie([][]byte{[]byte("a"), []byte("bx"), []byte("b"), nil}))
	if err := m.Accept([]byte("a")); err != nil {
		t.Fatal(err)
	}
	if err := m.AcceptToken(1); !errors.Is(err, ErrRejected) {
		t.Fatalf("bx: %v", err)
	}
	if err := m.AcceptToken(3); !errors.Is(err, ErrRejected) {
		t.Fatalf("control token: %v", err)
	}
	if m.IsComplete() {
		t.Fatal("complete after a")
	}
	if err := m.AcceptToken(2); err != nil {
		t.Fatal(err)
	}
	if !m.IsComplete() || m.Done() {
		t.Fatalf("after ab: complete %v done %v", m.IsComplete(), m.Done())
	}
	if err := m.Accept([]byte("c")); err != nil || !m.Done() {
		t.Fatalf("after abc: %v, done %v", err, m.Done())
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{arithmetic, JSONObjectGBNF(), `root ::= [^a-z]{2,5} . "x"*`, "root ::= (\"a\" | b)?\nb ::= [\\u00e9]"} {
		f.Add(s, []byte(`{"a": 1}`))
	}
	trie := NewTrie(smallVocab())
	f.Fuzz(func(t *testing.T, src string, text []byte) {
		g, err := Parse(src)
		if err != nil {
			var se *SyntaxError
			if !errors.As(err, &se) && !strings.Contains(err.Error(), "left recursion") {
				t.Fatalf("error of an unexpected kind: %v", err)
			}
			return
		}
		m := NewMatcher(g, trie)
		mask := NewMask(trie.Size())
		m.Allowed(mask)
		for i := range text {
			if m.Accept(text[i:i+1]) != nil {
				break
			}
		}
		m.Allowed(mask)
		m.IsComplete()
	})
}

func llama3Trie(tb testing.TB) (*tokenizer.Tokenizer, *Trie) {
	f, err := gguf.Open(shared.Models(tb, "llama.cpp-vocab/ggml-vocab-llama3-bpe.gguf"))
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	tok, err := tokenizer.FromGGUF(f)
	if err != nil {
		tb.Fatal(err)
	}
	return tok, TrieFor(tok)
}

const benchSchema = `{"type":"object","properties":{
	"name":{"type":"string","maxLength":40},
	"age":{"type":"integer","minimum":0,"maximum":150},
	"email":{"type":"string"},
	"role":{"enum":["admin","user","guest"]},
	"tags":{"type":"array","items":{"type":"string"},"maxItems":8}},
	"required":["name","age","role"],"additionalProperties":false}`

// TestMaskLlama3 checks the mask over the real Llama 3 vocabulary against
// accepting each token on its own, mid-object.
func TestMaskLlama3(t *testing.T) {
	tok, trie := llama3Trie(t)
	g, err := FromJSONSchema([]byte(benchSchema), SchemaOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, prefix := range []string{`{"name": "Jo`, `{"name": "Jo", "age": 1`, `{"name":"x","age":3,"role":"`, `{"name":"x","age":3,"role":"user"`} {
		m := NewMatcher(g, trie)
		if err := m.Accept([]byte(prefix)); err != nil {
			t.Fatal(err)
		}
		mask := NewMask(trie.Size())
		m.Allowed(mask)
		n := 0
		ref := NewMatcher(g, nil)
		if err := ref.Accept([]byte(prefix)); err != nil {
			t.Fatal(err)
		}
		at := ref.cur
		for id := range int32(tok.VocabSize()) {
			p := tok.Piece(id)
			ref.cur = at // back to the prefix: the token is tried on its own
			want := len(p) > 0 && ref.Accept(p) == nil
			if mask.Has(id) != want {
				t.Fatalf("after %q: token %d %q: mask %v, accept %v", prefix, id, p, mask.Has(id), want)
			}
			if want {
				n++
			}
		}
		t.Logf("after %q: %d tokens allowed", prefix, n)
	}
}

// BenchmarkMask measures one step's mask over the Llama 3 vocabulary
// (128256 tokens) inside a string mid-object, the widest mask a schema
// gives: "cold" starts a fresh matcher each time (every state and
// transition computed), "new-state" reuses the transitions but not the
// mask (a state seen for the first time, whose bytes lead to known
// states), "cached" is a state whose mask was computed before.
func BenchmarkMask(b *testing.B) {
	_, trie := llama3Trie(b)
	g, err := FromJSONSchema([]byte(benchSchema), SchemaOptions{})
	if err != nil {
		b.Fatal(err)
	}
	const prefix = `{"name": "Jo`
	mask := NewMask(trie.Size())
	b.Run("cold", func(b *testing.B) {
		defer lockThread()()
		cpu := threadCPU()
		for b.Loop() {
			m := NewMatcher(g, trie)
			m.Accept([]byte(prefix))
			m.Allowed(mask)
		}
		b.ReportMetric(float64(threadCPU()-cpu)/float64(b.N), "cpu-ns/op")
	})
	b.Run("new-state", func(b *testing.B) {
		defer lockThread()()
		m := NewMatcher(g, trie)
		m.Accept([]byte(prefix))
		m.Allowed(mask)
		cpu := threadCPU()
		for b.Loop() {
			clear(m.masks)
			m.Allowed(mask)
		}
		b.ReportMetric(float64(threadCPU()-cpu)/float64(b.N), "cpu-ns/op")
	})
	b.Run("cached", func(b *testing.B) {
		m := NewMatcher(g, trie)
		m.Accept([]byte(prefix))
		m.Allowed(mask)
		for b.Loop() {
			m.Allowed(mask)
		}
	})
}

// BenchmarkMaskGeneration is what a generation pays per token: a fresh
// matcher follows a document token by token, computing each step's mask
// (its states met for the first time) before accepting the token.
func BenchmarkMaskGeneration(b *testing.B) {
	tok, trie := llama3Trie(b)
	g, err := FromJSONSchema([]byte(benchSchema), SchemaOptions{})
	if err != nil {
		b.Fatal(err)
	}
	ids := tok.Encode(`{"name": "Johnathan Quincy Adams the Third", "age": 42, "role": "admin", "tags": ["alpha", "beta gamma"]}`, false)
	mask := NewMask(trie.Size())
	defer lockThread()()
	cpu := threadCPU()
	for b.Loop() {
		m := NewMatcher(g, trie)
		for _, id := range ids {
			m.Allowed(mask)
			if !mask.Has(id) {
				b.Fatalf("token %d %q not allowed", id, tok.Piece(id))
			}
			if err := m.AcceptToken(id); err != nil {
				b.Fatal(err)
			}
		}
	}
	steps := float64(b.N * len(ids))
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/steps, "ns/step")
	b.ReportMetric(float64(threadCPU()-cpu)/steps, "cpu-ns/step")
}

// TestPartialCharacters: a token may end inside a character only where the
// grammar allows some character starting with its bytes.
func TestPartialCharacters(t *testing.T) {
	g := mustParse(t, `root ::= "\"" [a-z\u00e9\U0001F600]* "\""`)
	cases := []struct {
		text string
		ok   bool
	}{
		{"\"\xC3", true},      // é starts so
		{"\"\xC4", false},     // U+0100.. is not in the class
		{"\"\xF0\x9F", true},  // 😀
		{"\"\xF0\x80", false}, // overlong
		{"\"\xE0\x80", false}, // overlong
		{"\"\xC0", false},     // never valid
		{"\"\xF5", false},     // past U+10FFFF
		{"\"\xA9", false},     // a continuation byte first
		{"\"\xC3\xA9\xF0\x9F\x98\x80a\"", true},
		{"\"\xED\xA0\x80\"", false}, // a surrogate
	}
	for _, c := range cases {
		m := NewMatcher(g, nil)
		if got := m.Accept([]byte(c.text)) == nil; got != c.ok {
			t.Errorf("%q: accepted %v, want %v", c.text, got, c.ok)
		}
	}
	// After `{` only `"`, `}` or whitespace may come: no multi-byte start.
	m := NewMatcher(JSONObject(), nil)
	if err := m.Accept([]byte("{ ")); err != nil {
		t.Fatal(err)
	}
	for _, b := range []byte{0xC3, 0xE2, 0xF0} {
		if m.Accept([]byte{b}) == nil {
			t.Errorf("byte %#x accepted after `{ `", b)
		}
	}
}

// TestAmbiguous: a grammar whose parses multiply with its nesting stops
// the matcher with ErrAmbiguous instead of taking exponential time.
func TestAmbiguous(t *testing.T) {
	var b strings.Builder
	b.WriteString("root ::= x14\nx0 ::= \"a\"\ny0 ::= \"a\"\n")
	for i := 1; i <= 14; i++ {
		fmt.Fprintf(&b, "x%d ::= x%d \"b\" | y%d \"b\"\ny%d ::= x%d \"b\" | y%d \"b\"\n", i, i-1, i-1, i, i-1, i-1)
	}
	g := mustParse(t, b.String())
	m := NewMatcher(g, NewTrie(smallVocab()))
	if err := m.Accept([]byte("a")); !errors.Is(err, ErrAmbiguous) {
		t.Fatalf("Accept: %v, want ErrAmbiguous", err)
	}
	mask := NewMask(len(smallVocab()))
	m.Allowed(mask)
	for _, w := range mask {
		if w != 0 {
			t.Fatal("a stopped matcher allows tokens")
		}
	}
	// Ten levels (1024 parses) are within the bound and still match.
	small := strings.Replace(b.String(), "root ::= x14", "root ::= x10", 1)
	if !accepts(mustParse(t, small), "a"+strings.Repeat("b", 10)) {
		t.Error("x10 rejects a b^10")
	}
}
