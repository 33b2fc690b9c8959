package chattemplate

import (
	"encoding/json"
	"testing"
)

// FuzzParseJSON: the order-keeping decoder accepts exactly what
// encoding/json accepts, and never panics.
func FuzzParseJSON(f *testing.F) {
	for _, s := range []string{`[{"role":"user","content":"hi"}]`, `{"a":1,"b":[1.5,null,true,"é"]}`, `[`, `{"a"}`, `1 2`, ``, `"\ud800"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		_, err := ParseJSON(b)
		if valid := json.Valid(b); valid != (err == nil) {
			t.Fatalf("%q: json.Valid %v, ParseJSON error %v", b, valid, err)
		}
	})
}
