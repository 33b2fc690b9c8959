package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/glint-llm/glint/internal/shared"
)

// TestGrammarFlags: --grammar and -j hold the output to a language, on a
// random-weight model with the real Llama 3 vocabulary; bad ones are
// errors naming where.
func TestGrammarFlags(t *testing.T) {
	model := shared.Models(t, "llama3-tiny/llama3-tiny-Q8_0.gguf")
	out, stderr, code := run(t, "-m", model, "-p", "Yes or no?", "--temp", "1", "-s", "5", "-n", "50", "--grammar", `root ::= ("yes" | "no") "!"`)
	if code != 0 || (out != "yes!" && out != "no!") {
		t.Errorf("--grammar: exit %d, stdout %q: %s", code, out, stderr)
	}
	schema := `{"type":"object","properties":{"n":{"type":"integer","minimum":10,"maximum":20}},"required":["n"],"additionalProperties":false}`
	out, stderr, code = run(t, "-m", model, "-p", "JSON:", "--temp", "1", "-s", "7", "-n", "200", "-j", schema)
	var v struct{ N *int }
	if code != 0 || json.Unmarshal([]byte(out), &v) != nil || v.N == nil || *v.N < 10 || *v.N > 20 {
		t.Errorf("-j: exit %d, stdout %q: %s", code, out, stderr)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--grammar", `root ::= "a`}, "line 1 col 10: unterminated string literal"},
		{[]string{"-j", `{"type":"string","pattern":"(?=x)"}`}, `--json-schema: grammar: schema #: pattern "(?=x)"`},
		{[]string{"-j", `{}`, "--grammar", `root ::= "a"`}, "give one of them"},
		{[]string{"--grammar-file", "/nonexistent.gbnf"}, "nonexistent.gbnf"},
	} {
		_, stderr, code := run(t, append([]string{"-m", model, "-p", "x", "-n", "4"}, c.args...)...)
		if code == 0 || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q, want %q", c.args, code, stderr, c.want)
		}
	}
}
