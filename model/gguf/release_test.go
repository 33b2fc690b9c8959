package gguf

import (
	"bytes"
	"path/filepath"
	"testing"

	"github.com/glint-llm/glint/dtype"
)

// Released pages read back from the file: the data is unchanged.
func TestReleasePagesKeepsData(t *testing.T) {
	w := NewWriter()
	big := make([]byte, 3<<16+5)
	for i := range big {
		big[i] = byte(i * 7)
	}
	if err := w.AddTensor("t", dtype.F32, []int{len(big) / 4}, big[:len(big)/4*4]); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "r.gguf")
	if err := w.WriteFile(p); err != nil {
		t.Fatal(err)
	}
	f, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	before, _, _ := f.TensorData("t")
	want := bytes.Clone(before)
	f.ReleasePages("t")
	f.ReleasePages("no such tensor")
	after, _, _ := f.TensorData("t")
	if !bytes.Equal(after, want) {
		t.Fatal("tensor data changed after ReleasePages")
	}
}
