package synth_test

import (
	"testing"

	"github.com/glint-llm/glint/internal/shared"
	"github.com/glint-llm/glint/model/gguf"
	"github.com/glint-llm/glint/model/synth"
)

// TestMixMatchesLlamaQuantize: synth's K-quant models of the small shape
// give every tensor the type llama-quantize gave it in the staged kq-small
// files, which were quantised from a synth file of the same shape and
// vocabulary.
func TestMixMatchesLlamaQuantize(t *testing.T) {
	vocab := shared.Models(t, "stories260K/stories260K.gguf")
	// The targets whose mixes differ most (model/quant checks every target's
	// rules against all the staged files; generating is the slow part here).
	for _, typ := range []string{"Q2_K", "Q3_K_M", "Q4_K_M", "Q5_K_S", "Q6_K"} {
		t.Run(typ, func(t *testing.T) {
			want, err := gguf.Open(shared.Models(t, "kquants/kq-small-"+typ+".gguf"))
			if err != nil {
				t.Fatal(err)
			}
			defer want.Close()
			got, err := gguf.Open(write(t, synth.Options{Shape: "small", Type: typ, Seed: 5, Std: 0.05, VocabGGUF: vocab}))
			if err != nil {
				t.Fatal(err)
			}
			defer got.Close()
			if len(got.Tensors) != len(want.Tensors) {
				t.Fatalf("%d tensors, llama-quantize's file has %d", len(got.Tensors), len(want.Tensors))
			}
			for _, wt := range want.Tensors {
				gt, ok := got.Info(wt.Name)
				if !ok || gt.Type != wt.Type {
					t.Errorf("%s: %v, llama-quantize %v", wt.Name, gt.Type, wt.Type)
				}
			}
			for _, k := range []string{"general.file_type", "general.quantization_version"} {
				g, _ := got.Uint(k)
				w, _ := want.Uint(k)
				if g != w {
					t.Errorf("%s = %d, llama-quantize %d", k, g, w)
				}
			}
		})
	}
}
