package grammar

import (
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"
)

// jsonQuote is s as a JSON string, with the short escapes.
func jsonQuote(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`, "\r", `\r`, "\t", `\t`)
	return `"` + r.Replace(s) + `"`
}

// checkPattern holds the grammar of a pattern to Go's regexp over
// candidates: every document it accepts is a string the expression
// matches, and every string the expression matches that has no character
// JSON escapes (which the grammar's classes leave out) is accepted.
func checkPattern(t *testing.T, pattern string, candidates []string) {
	t.Helper()
	g, err := FromJSONSchema([]byte(`{"type":"string","pattern":`+jsonQuote(pattern)+`}`), SchemaOptions{})
	if err != nil {
		t.Fatalf("%q: %v", pattern, err)
	}
	re := regexp.MustCompile(pattern)
	for _, s := range candidates {
		got, want := accepts(g, jsonQuote(s)), re.MatchString(s)
		if got && !want {
			t.Errorf("%q accepts %q, which it does not match\n%s", pattern, s, g)
		}
		if !got && want && !strings.ContainsFunc(s, needsEscape) {
			t.Errorf("%q rejects %q, which it matches\n%s", pattern, s, g)
		}
	}
}

func TestPattern(t *testing.T) {
	words := []string{"", "a", "ab", "abc", "abcabc", "A", "ABC", "aBc", "x", "xyz", "a-1", "a-12", "a-123", "-1",
		"123", "1234", "12345", "1a", "2024-01-31", "2024-1-31", "ab@cd.ef", "ab@cd", "@cd.ef", "foo bar", "foo  bar",
		"foo\nbar", `a"b`, `a\b`, "é", "éé", "_id9", "9id", "+33 6 12 34 56 78", "0033612345678", "#ff00aa", "#FF00AA", "#ff00a",
		"cat", "dog", "catdog", "hotdog", "a.b", "aXb", "[x]", "(1)", "a+b", "ab{2}", "\t", " "}
	for _, p := range []string{
		`^abc$`, `abc`, `^abc`, `abc$`, `^$`, `^a*$`, `^a+b?c{1,2}$`, `^(abc)+$`, `^(?:cat|dog)$`, `cat|dog`,
		`^[a-z]+-\d{1,2}$`, `^\d{4}-\d{2}-\d{2}$`, `^[^@\s]+@[^@\s]+\.[a-z]{2,}$`, `^foo\s+bar$`, `^.+$`, `^.{2}$`,
		`^\w+$`, `^[A-Za-z_][A-Za-z0-9_]*$`, `^\+?[0-9 ]{6,20}$`, `^#[0-9a-fA-F]{6}$`, `(?i)^abc$`, `^[é]+$`,
		`^a"b$`, `^a\\b$`, `^a\.b$`, `^\[x\]$`, `^\(\d\)$`, `^a\+b$`, `^[^"]*$`, `^.*$`, `^a{2,}$`, `^(ab|c)?d*$`,
	} {
		checkPattern(t, p, words)
	}
}

func TestPatternErrors(t *testing.T) {
	for _, c := range []struct{ schema, msg string }{
		{`{"type":"string","pattern":"^a$|^b$"}`, "only at the pattern's ends"},
		{`{"type":"string","pattern":"(a"}`, "missing closing )"},
		{`{"type":"string","pattern":"\\bword"}`, "not supported"},
		{`{"type":"string","pattern":"^a{2000}$"}`, "invalid repeat count"},
		{`{"type":"string","pattern":"^[\"\\\\]$"}`, "only characters JSON escapes"},
		{`{"type":"string","pattern":5}`, "not a string"},
		{`{"type":"string","pattern":"^(a*)*$"}`, "may be empty"},
		{`{"type":"string","pattern":"^(a|b?)+$"}`, "may be empty"},
		{`{"type":"string","pattern":"^(a?){2,}$"}`, "may be empty"},
		{`{"type":"string","pattern":"^a+$","maxLength":3}`, "pattern with minLength"},
	} {
		_, err := FromJSONSchema([]byte(c.schema), SchemaOptions{})
		if err == nil || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%s: %v, want an error saying %q", c.schema, err, c.msg)
		}
	}
}

// FuzzPattern: a pattern either is an error or gives a grammar whose
// documents the expression matches (checkPattern's two directions).
func FuzzPattern(f *testing.F) {
	f.Add(`^[a-z]+-\d{1,2}$`, "ab-12")
	f.Add(`(?i)cat|dog`, "xDOGx")
	f.Add(`^(a|b)*c?$`, "abac")
	f.Fuzz(func(t *testing.T, pattern, s string) {
		if !utf8.ValidString(pattern) || !utf8.ValidString(s) || len(pattern) > 64 || len(s) > 64 {
			return
		}
		if _, err := regexp.Compile(pattern); err != nil {
			return
		}
		src, err := SchemaToGBNF([]byte(`{"type":"string","pattern":`+jsonQuote(pattern)+`}`), SchemaOptions{})
		if err != nil {
			return
		}
		if _, err := Parse(src); err != nil {
			t.Fatalf("%q: its grammar does not parse: %v\n%s", pattern, err, src)
		}
		checkPattern(t, pattern, []string{s, "", "a", "abc"})
	})
}
