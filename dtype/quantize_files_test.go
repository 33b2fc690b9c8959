package dtype_test

import (
	"bytes"
	"slices"
	"testing"

	"github.com/glint-llm/glint/dtype"
	"github.com/glint-llm/glint/internal/shared"
	"github.com/glint-llm/glint/model/gguf"
)

// maxRows bounds the rows checked per tensor (the 128256-row embeddings),
// keeping the suite fast under -race; the rows checked are the first ones.
const maxRows = 3000

func openGGUF(t *testing.T, rel string) *gguf.File {
	t.Helper()
	f, err := gguf.Open(shared.Models(t, rel))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// rowsOf returns up to maxRows rows of a tensor as float32, with its row
// length and stored bytes for those rows.
func rowsOf(t *testing.T, f *gguf.File, name string) ([]float32, int, []byte) {
	t.Helper()
	td, err := f.Tensor(name)
	if err != nil {
		t.Fatal(err)
	}
	cols := td.Shape[len(td.Shape)-1]
	rb, err := td.Type.RowBytes(cols)
	if err != nil {
		t.Fatal(err)
	}
	rows := min(len(td.Data)/rb, maxRows)
	x := make([]float32, rows*cols)
	for r := 0; r < rows; r++ {
		dtype.DequantizeRow(td.Type, x[r*cols:(r+1)*cols], td.Data[r*rb:(r+1)*rb])
	}
	return x, cols, td.Data[:rows*rb]
}

func quantize(t dtype.Type, x []float32, cols int) []byte {
	rb, _ := t.RowBytes(cols)
	out := make([]byte, len(x)/cols*rb)
	for r := 0; r < len(x)/cols; r++ {
		dtype.QuantizeRow(t, out[r*rb:(r+1)*rb], x[r*cols:(r+1)*cols])
	}
	return out
}

// TestQuantizeMatchesLlamaCpp quantises the tensors of the staged F32/F16
// source models to each tensor's type in the files llama-quantize made from
// them: the bytes must be identical, which pins QuantizeRow to ggml's
// reference quantisers (Q4_0, Q8_0, and F16 for stories260K's ffn_down).
func TestQuantizeMatchesLlamaCpp(t *testing.T) {
	for _, tc := range []struct{ src, dst string }{
		{"stories260K/stories260K.gguf", "stories260K/stories260K-Q4_0.gguf"},
		{"stories260K/stories260K.gguf", "stories260K/stories260K-Q8_0.gguf"},
		{"llama3-tiny/llama3-tiny-F16.gguf", "llama3-tiny/llama3-tiny-Q4_0.gguf"},
		{"llama3-tiny/llama3-tiny-F16.gguf", "llama3-tiny/llama3-tiny-Q8_0.gguf"},
	} {
		t.Run(tc.dst, func(t *testing.T) {
			src, dst := openGGUF(t, tc.src), openGGUF(t, tc.dst)
			types := map[dtype.Type]int{}
			for _, ti := range dst.Tensors {
				x, cols, _ := rowsOf(t, src, ti.Name)
				td, err := dst.Tensor(ti.Name)
				if err != nil {
					t.Fatal(err)
				}
				got := quantize(ti.Type, x, cols)
				if want := td.Data[:len(got)]; !bytes.Equal(got, want) {
					i := 0
					for got[i] == want[i] {
						i++
					}
					t.Errorf("%s (%v): first difference at byte %d: %#x, llama.cpp %#x", ti.Name, ti.Type, i, got[i], want[i])
				}
				types[ti.Type]++
			}
			if types[dtype.Q4_0]+types[dtype.Q8_0] == 0 {
				t.Errorf("no quantised tensors compared: %v", types)
			}
		})
	}
}

// TestRequantizeDequantized re-quantises the dequantised rows of staged
// quantised tensors. Q8_0 and Q4_0 must give back the same bytes: the
// largest value sits exactly on the grid, so the scale and every level are
// recovered. Q6_K's make_qx_quants search may pick another scale with the
// same values (e.g. scale 2s with halved levels), so for Q6_K the
// dequantised values must be identical and the bytes are only counted:
// about 80% of blocks come back byte-identical on llama3-small's embedding.
func TestRequantizeDequantized(t *testing.T) {
	for _, rel := range []string{"stories260K/stories260K-Q4_0.gguf", "stories260K/stories260K-Q8_0.gguf", "llama3-small/llama3-small-Q4_0.gguf"} {
		t.Run(rel, func(t *testing.T) {
			f := openGGUF(t, rel)
			sawQ6K := false
			for _, ti := range f.Tensors {
				if !ti.Type.Quantized() {
					continue
				}
				x, cols, stored := rowsOf(t, f, ti.Name)
				got := quantize(ti.Type, x, cols)
				if ti.Type != dtype.Q6_K {
					if !bytes.Equal(got, stored) {
						t.Errorf("%s (%v): re-quantised bytes differ", ti.Name, ti.Type)
					}
					continue
				}
				sawQ6K = true
				y := make([]float32, len(x))
				rb, _ := ti.Type.RowBytes(cols)
				for r := 0; r < len(x)/cols; r++ {
					dtype.DequantizeRow(ti.Type, y[r*cols:(r+1)*cols], got[r*rb:(r+1)*rb])
				}
				if !slices.Equal(x, y) {
					t.Errorf("%s (Q6_K): re-quantised values differ", ti.Name)
				}
				same := 0
				for b := 0; b < len(got); b += dtype.BlockBytesQ6_K {
					if bytes.Equal(got[b:b+dtype.BlockBytesQ6_K], stored[b:b+dtype.BlockBytesQ6_K]) {
						same++
					}
				}
				t.Logf("%s (Q6_K): %d of %d blocks byte-identical, all values identical", ti.Name, same, len(got)/dtype.BlockBytesQ6_K)
			}
			if rel == "llama3-small/llama3-small-Q4_0.gguf" && !sawQ6K {
				t.Error("no Q6_K tensor found")
			}
		})
	}
}
