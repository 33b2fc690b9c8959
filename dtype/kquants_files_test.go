package dtype_test

import (
	"bytes"
	"path/filepath"
	"testing"

	"github.com/glint-llm/glint/dtype"
)

// kquantFiles are the staged files llama-quantize made from kq-small-F16.gguf
// (shared/models/kquants, MANIFEST section 12).
var kquantFiles = []string{"Q4_1", "Q5_0", "Q5_1", "Q2_K", "Q3_K_S", "Q3_K_M", "Q3_K_L", "Q4_K_S", "Q4_K_M",
	"Q5_K_S", "Q5_K_M", "Q6_K", "IQ4_NL", "IQ4_XS"}

// TestQuantizeMatchesLlamaCppKQuants quantises the first rows of every
// tensor of kq-small-F16 to the type llama-quantize gave it in each staged
// file: the bytes must be identical, block for block, which pins each
// quantiser to ggml's reference code with no importance matrix. (32 rows
// of each tensor are thousands of blocks per type; model/quant compares the
// whole files.)
func TestQuantizeMatchesLlamaCppKQuants(t *testing.T) {
	src := openGGUF(t, "kquants/kq-small-F16.gguf")
	seen := map[dtype.Type]bool{}
	for _, name := range kquantFiles {
		t.Run(name, func(t *testing.T) {
			dst := openGGUF(t, filepath.Join("kquants", "kq-small-"+name+".gguf"))
			for _, ti := range dst.Tensors {
				if !ti.Type.Quantized() {
					continue
				}
				x, cols, _ := rowsOf(t, src, ti.Name)
				x = x[:min(len(x), 32*cols)]
				td, err := dst.Tensor(ti.Name)
				if err != nil {
					t.Fatal(err)
				}
				got := quantize(ti.Type, x, cols)
				want := td.Data[:len(got)]
				if !bytes.Equal(got, want) {
					bb := ti.Type.BlockBytes()
					bad := 0
					first := -1
					for b := 0; b < len(got); b += bb {
						if !bytes.Equal(got[b:b+bb], want[b:b+bb]) {
							bad++
							if first < 0 {
								first = b / bb
							}
						}
					}
					t.Errorf("%s (%v): %d of %d blocks differ, first block %d", ti.Name, ti.Type, bad, len(got)/bb, first)
				}
				seen[ti.Type] = true
			}
		})
	}
	if !t.Failed() {
		for _, dt := range []dtype.Type{dtype.Q4_1, dtype.Q5_0, dtype.Q5_1, dtype.Q2_K, dtype.Q3_K, dtype.Q4_K, dtype.Q5_K, dtype.Q6_K, dtype.IQ4_NL, dtype.IQ4_XS} {
			if !seen[dt] {
				t.Errorf("no %v tensor compared", dt)
			}
		}
	}
}
