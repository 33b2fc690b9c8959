package safetensors

import (
	"bytes"
	"path/filepath"
	"testing"

	"github.com/glint-llm/glint/dtype"
)

// Released pages read back from the file: the data is unchanged.
func TestReleasePagesKeepsData(t *testing.T) {
	w := NewWriter()
	big := make([]byte, 3<<16)
	for i := range big {
		big[i] = byte(i * 13)
	}
	if err := w.Add("t", dtype.F32, []int{len(big) / 4}, big); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "m.safetensors")
	if err := w.WriteFile(p); err != nil {
		t.Fatal(err)
	}
	f, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	f.ReleasePages("t")
	f.ReleasePages("missing")
	td, err := f.Tensor("t")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(td.Data, big) {
		t.Fatal("tensor data changed after ReleasePages")
	}
}
