package layers_test

import (
	"math"
	"path/filepath"
	"slices"
	"testing"

	"github.com/glint-llm/glint/backend/cpu"
	"github.com/glint-llm/glint/layers"
	"github.com/glint-llm/glint/model/load"
	"github.com/glint-llm/glint/model/synth"
	"github.com/glint-llm/glint/tokenizer"
)

// A Hugging Face folder (config.json, safetensors with unpermuted Q/K and
// NeoX RoPE, rope_freqs computed from rope_scaling, tokenizer.json) and the
// GGUF file of the same synthetic model are the same model: same ids from
// the same text, and logits equal up to float32 rounding.
func TestHuggingFaceEqualsGGUF(t *testing.T) {
	dir := t.TempDir()
	o := synth.Options{Shape: "tiny", Type: "F32", Seed: 9, Std: 0.2}
	gg, hf := filepath.Join(dir, "m.gguf"), filepath.Join(dir, "hf")
	if err := synth.WriteGGUF(gg, o); err != nil {
		t.Fatal(err)
	}
	if err := synth.WriteHF(hf, o); err != nil {
		t.Fatal(err)
	}
	fg, err := load.Open(gg)
	if err != nil {
		t.Fatal(err)
	}
	defer fg.Close()
	if !fg.Config.HasRopeFreqs {
		t.Fatal("the tiny shape should use Llama 3 rope scaling")
	}
	tg, err := tokenizer.FromGGUF(fg.GGUF)
	if err != nil {
		t.Fatal(err)
	}
	th, err := tokenizer.FromHF(hf)
	if err != nil {
		t.Fatal(err)
	}
	text := "Once upon a time, there were 3 little models.\n  They ran<|eot_id|>"
	ig, ih := tg.Encode(text, true), th.Encode(text, true)
	if !slices.Equal(ig, ih) {
		t.Fatalf("GGUF tokenizer %v, tokenizer.json %v", ig, ih)
	}

	var logits [2][]float32
	for i, path := range []string{gg, hf} {
		f, err := load.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		b := cpu.New(1)
		defer b.Close()
		m, err := layers.Load(b, f.Config, f.Source, layers.Options{Context: 128})
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		s := &stream{m: m}
		if err := s.eval(ig); err != nil {
			t.Fatal(err)
		}
		logits[i] = s.logits(t)
	}
	var worst, scale float64
	for i := range logits[0] {
		worst = math.Max(worst, math.Abs(float64(logits[0][i]-logits[1][i])))
		scale = math.Max(scale, math.Abs(float64(logits[0][i])))
	}
	if worst > 1e-5*scale {
		t.Fatalf("max |Δlogit| %g between GGUF and HF (scale %g)", worst, scale)
	}
}
