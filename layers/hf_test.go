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

// Every architecture's Hugging Face folder and GGUF file of one synthetic
// model compute the same logits: the loader's per-architecture names, its
// Gemma norms (1 + w), GPT-2 transposes, LongRoPE factors from
// config.json and the unfused views of Phi-3's and GPT-2's fused matrices
// undo what the converter does. F32 both ways, so the results agree to
// float32 rounding of the few values computed differently (none: the same
// bits are expected, 1e-6 allows for it).
func TestHuggingFaceEqualsGGUFArchs(t *testing.T) {
	prompt := []int32{1, 17, 42, 99, 7, 250, 3, 64, 128, 5, 11, 300}
	for _, arch := range []string{"qwen2", "qwen3", "gemma2", "gemma3", "phi3", "gpt2"} {
		t.Run(arch, func(t *testing.T) {
			var logits [2][]float32
			for i, hf := range []bool{false, true} {
				path := synthArch(t, arch, "F32", hf)
				f, err := load.Open(path)
				if err != nil {
					t.Fatal(err)
				}
				defer f.Close()
				if (f.GGUF == nil) != hf || f.Config.Arch != arch {
					t.Fatalf("%s opened as %q (GGUF %v)", path, f.Config.Arch, f.GGUF != nil)
				}
				b := cpu.New(1)
				defer b.Close()
				m, err := layers.Load(b, f.Config, f.Source, layers.Options{Context: 64})
				if err != nil {
					t.Fatal(err)
				}
				defer m.Close()
				st := &stream{m: m}
				if err := st.eval(prompt); err != nil {
					t.Fatal(err)
				}
				logits[i] = st.logits(t)
			}
			var worst float64
			for i := range logits[0] {
				worst = math.Max(worst, math.Abs(float64(logits[0][i]-logits[1][i])))
			}
			if worst > 1e-6 {
				t.Fatalf("max |Δlogit| %g between GGUF and HF", worst)
			}
		})
	}
}
