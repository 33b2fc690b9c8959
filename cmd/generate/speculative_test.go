package main

import (
	"fmt"
	"path/filepath"
	"regexp"

	"testing"

	"github.com/glint-llm/glint/model/synth"
)

// TestGenerateSpeculative: with a draft model (-md, its Q4_0 twin) or
// ngram-simple drafts, generate prints plain greedy decoding's ids and
// says on stderr how many target passes made them: one per token, less
// the drafts accepted.
func TestGenerateSpeculative(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, o synth.Options) string {
		p := filepath.Join(dir, name)
		if err := synth.WriteGGUF(p, o); err != nil {
			t.Fatal(err)
		}
		return p
	}
	target := write("t.gguf", synth.Options{Shape: "tiny", Type: "F16", Seed: 4, Std: 0.08})
	draft := write("d.gguf", synth.Options{Shape: "tiny", Type: "Q4_0", Seed: 4, Std: 0.08})
	base := []string{"-m", target, "--temp", "0", "-n", "40", "--prompt-ids", "1,20,31,42", "--output", "ids", "--ignore-eos", "-t", "2"}
	want, stderr, code := run(t, base...)
	if code != 0 {
		t.Fatalf("plain: exit %d: %s", code, stderr)
	}
	line := regexp.MustCompile(`speculative: 40 tokens in (\d+) target passes \(drafted (\d+), accepted (\d+)\)`)
	for name, extra := range map[string][]string{
		"draft-model":  {"-md", draft, "--draft-max", "6"},
		"ngram-simple": {"--spec-type", "ngram-simple", "--spec-ngram-size-n", "1", "--spec-ngram-size-m", "4"},
	} {
		t.Run(name, func(t *testing.T) {
			got, stderr, code := run(t, append(append([]string{}, base...), extra...)...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			if got != want {
				t.Errorf("ids %q, plain decoding's %q", got, want)
			}
			m := line.FindStringSubmatch(stderr)
			if m == nil {
				t.Fatalf("no speculative line on stderr: %q", stderr)
			}
			t.Log(m[0])
			var passes, drafted, accepted int
			fmt.Sscan(m[1]+" "+m[2]+" "+m[3], &passes, &drafted, &accepted)
			if passes+accepted != 40 {
				t.Errorf("%d passes and %d accepted drafts make %d tokens, want 40", passes, accepted, passes+accepted)
			}
		})
	}
}
