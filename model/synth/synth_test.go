package synth_test

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/glint-llm/glint/dtype"
	"github.com/glint-llm/glint/internal/shared"
	"github.com/glint-llm/glint/model"
	"github.com/glint-llm/glint/model/gguf"
	"github.com/glint-llm/glint/model/load"
	"github.com/glint-llm/glint/model/synth"
)

func write(t *testing.T, o synth.Options) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "m.gguf")
	if err := synth.WriteGGUF(p, o); err != nil {
		t.Fatal(err)
	}
	return p
}

func open(t *testing.T, path string) *load.File {
	t.Helper()
	f, err := load.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func floats(t *testing.T, td model.TensorData) []float32 {
	t.Helper()
	cols := td.Shape[len(td.Shape)-1]
	rows := len(td.Data) / must(td.Type.RowBytes(cols))
	out := make([]float32, rows*cols)
	rb := must(td.Type.RowBytes(cols))
	for r := 0; r < rows; r++ {
		dtype.DequantizeRow(td.Type, out[r*cols:(r+1)*cols], td.Data[r*rb:(r+1)*rb])
	}
	return out
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func TestWriteGGUFDeterministic(t *testing.T) {
	for _, typ := range []string{"F32", "Q4_0"} {
		o := synth.Options{Shape: "tiny", Type: typ, Seed: 7}
		a, _ := os.ReadFile(write(t, o))
		b, _ := os.ReadFile(write(t, o))
		if !bytes.Equal(a, b) {
			t.Errorf("%s: two writes with the same options differ", typ)
		}
		o.Seed = 8
		c, _ := os.ReadFile(write(t, o))
		if bytes.Equal(a, c) {
			t.Errorf("%s: seeds 7 and 8 give the same file", typ)
		}
	}
}

// TestGGUFMatchesHF: the GGUF and Hugging Face forms of one seed, opened
// through package load, hold identical tensors except that GGUF Q/K rows are
// permuted as convert_hf_to_gguf.py permutes them, and the configs differ
// only in RoPE pairing.
func TestGGUFMatchesHF(t *testing.T) {
	o := synth.Options{Shape: "tiny", Type: "F32", Seed: 3}
	g := open(t, write(t, o))
	dir := t.TempDir()
	if err := synth.WriteHF(dir, o); err != nil {
		t.Fatal(err)
	}
	h := open(t, dir)
	gc, hc := g.Config, h.Config
	if gc.RopeNeoX || !hc.RopeNeoX {
		t.Errorf("RopeNeoX: GGUF %v, HF %v", gc.RopeNeoX, hc.RopeNeoX)
	}
	hc.RopeNeoX = false
	if gc != hc {
		t.Errorf("configs differ:\nGGUF %+v\nHF   %+v", gc, hc)
	}
	if want := must(must(synth.LookupShape("tiny")).Config("llama")); gc != want {
		t.Errorf("config %+v, want %+v", gc, want)
	}
	for _, ts := range gc.TensorShapes() {
		gt, err := g.Source.Tensor(ts.Name)
		if err != nil {
			t.Fatal(err)
		}
		ht, err := h.Source.Tensor(ts.Name)
		if err != nil {
			t.Fatal(err)
		}
		want := ht.Data
		switch {
		case strings.HasSuffix(ts.Name, "attn_q.weight"):
			want = must(model.PermuteQK(ht.Data, ts.Shape[0], gc.NHead))
		case strings.HasSuffix(ts.Name, "attn_k.weight"):
			want = must(model.PermuteQK(ht.Data, ts.Shape[0], gc.NHeadKV))
		}
		if gt.Type != dtype.F32 || ht.Type != dtype.F32 || !slices.Equal(gt.Shape, ht.Shape) || !bytes.Equal(gt.Data, want) {
			t.Errorf("%s: GGUF %v %v and HF %v %v differ", ts.Name, gt.Type, gt.Shape, ht.Type, ht.Shape)
		}
	}
}

// TestWriteGGUFTypes checks each storage type's tensor-type mix and that
// its values are the F32 model's within the format's precision.
func TestWriteGGUFTypes(t *testing.T) {
	ref := map[string]*load.File{}
	for _, tc := range []struct {
		shape, typ     string
		fileType       uint64
		weight, embed  dtype.Type
		maxRelRMSError float64 // dequantised vs F32, relative to the weights' RMS
	}{
		{"tiny", "F16", 1, dtype.F16, dtype.F16, 1e-3},
		{"tiny", "BF16", 32, dtype.BF16, dtype.BF16, 4e-3},
		{"tiny", "Q8_0", 7, dtype.Q8_0, dtype.Q8_0, 0.01},
		// Q6_K needs 256-wide rows: tiny's 64 falls back to Q8_0.
		{"tiny", "Q4_0", 2, dtype.Q4_0, dtype.Q8_0, 0.12},
		{"small", "Q4_0", 2, dtype.Q4_0, dtype.Q6_K, 0.12},
		{"tiny", "Q4_0-pure", 2, dtype.Q4_0, dtype.Q4_0, 0.12},
	} {
		if ref[tc.shape] == nil {
			ref[tc.shape] = open(t, write(t, synth.Options{Shape: tc.shape, Seed: 5}))
		}
		r := ref[tc.shape]
		t.Run(tc.shape+"/"+tc.typ, func(t *testing.T) {
			f := open(t, write(t, synth.Options{Shape: tc.shape, Type: tc.typ, Seed: 5}))
			if ft, err := f.GGUF.Uint("general.file_type"); err != nil || ft != tc.fileType {
				t.Errorf("general.file_type = %d (%v), want %d", ft, err, tc.fileType)
			}
			for _, ts := range f.Config.TensorShapes() {
				td := must(f.Source.Tensor(ts.Name))
				want := tc.weight
				switch {
				case len(ts.Shape) == 1:
					want = dtype.F32
				case ts.Name == "token_embd.weight":
					want = tc.embed
				}
				if td.Type != want {
					t.Errorf("%s is %v, want %v", ts.Name, td.Type, want)
				}
				got, exp := floats(t, td), floats(t, must(r.Source.Tensor(ts.Name)))
				var se, sx float64
				for i := range got {
					d := float64(got[i] - exp[i])
					se += d * d
					sx += float64(exp[i]) * float64(exp[i])
				}
				tol := tc.maxRelRMSError
				if len(ts.Shape) == 1 {
					tol = 0
				}
				if rel := math.Sqrt(se / sx); rel > tol {
					t.Errorf("%s: relative RMS error %.3g > %g", ts.Name, rel, tol)
				}
			}
		})
	}
}

// TestWeightStatistics: weights are N(0, Std) and norms 1 + N(0, Std).
func TestWeightStatistics(t *testing.T) {
	f := open(t, write(t, synth.Options{Shape: "small", Seed: 1, Std: 0.05}))
	for _, tc := range []struct {
		name      string
		mean, std float64
	}{
		{"token_embd.weight", 0, 0.05},
		{"blk.1.ffn_down.weight", 0, 0.05},
		{"blk.0.attn_norm.weight", 1, 0.05},
	} {
		x := floats(t, must(f.Source.Tensor(tc.name)))
		var s, s2 float64
		for _, v := range x {
			s += float64(v)
			s2 += float64(v) * float64(v)
		}
		n := float64(len(x))
		mean := s / n
		std := math.Sqrt(s2/n - mean*mean)
		// Sampling error of the mean is std/√n; allow 5 of them, and 10%
		// on the deviation (n ≥ 256).
		if math.Abs(mean-tc.mean) > 5*tc.std/math.Sqrt(n) || math.Abs(std-tc.std) > 0.1*tc.std {
			t.Errorf("%s: mean %.4g std %.4g, want %g and %g", tc.name, mean, std, tc.mean, tc.std)
		}
	}
	rf := floats(t, must(f.Source.Tensor("rope_freqs.weight")))
	if want := model.Llama3RopeFreqs(64, 500000, model.RopeScaling{Factor: 32, LowFreqFactor: 1, HighFreqFactor: 4, OriginalContext: 8192}); !slices.Equal(rf, want) {
		t.Errorf("rope_freqs %v, want %v", rf, want)
	}
}

func TestBuiltinTokenizer(t *testing.T) {
	f := open(t, write(t, synth.Options{Shape: "tiny", Type: "Q8_0", Seed: 1}))
	g := f.GGUF
	tokens := must(g.Strings("tokenizer.ggml.tokens"))
	types := must(g.Int32s("tokenizer.ggml.token_type"))
	merges := must(g.Strings("tokenizer.ggml.merges"))
	if len(tokens) != f.Config.Vocab || len(types) != len(tokens) {
		t.Fatalf("%d tokens, %d types, vocab %d", len(tokens), len(types), f.Config.Vocab)
	}
	if m := must(g.String("tokenizer.ggml.model")); m != "gpt2" {
		t.Errorf("tokenizer model %q", m)
	}
	// GPT-2's byte-to-unicode order: "!" first, and byte 0x20 (space)
	// appears as 'Ġ' (U+0120).
	if tokens[0] != "!" || !slices.Contains(tokens[:256], "Ġ") {
		t.Errorf("byte tokens start %q and lack Ġ", tokens[:4])
	}
	id := map[string]int{}
	for i, s := range tokens {
		if _, dup := id[s]; dup {
			t.Fatalf("token %q appears twice", s)
		}
		id[s] = i
	}
	if len(merges) < 100 {
		t.Errorf("only %d merges", len(merges))
	}
	for _, m := range merges {
		a, b, ok := strings.Cut(m, " ")
		_, okA := id[a]
		_, okB := id[b]
		_, okAB := id[a+b]
		if !ok || !okA || !okB || !okAB {
			t.Fatalf("merge %q does not join two tokens into a token", m)
		}
	}
	for _, tc := range []struct {
		key  string
		want string
	}{
		{"tokenizer.ggml.bos_token_id", "<|begin_of_text|>"},
		{"tokenizer.ggml.eos_token_id", "<|end_of_text|>"},
		{"tokenizer.ggml.eot_token_id", "<|eot_id|>"},
	} {
		i := must(g.Uint(tc.key))
		if tokens[i] != tc.want || types[i] != 3 {
			t.Errorf("%s = %d is %q (type %d), want control token %q", tc.key, i, tokens[i], types[i], tc.want)
		}
	}
	if tokens[len(tokens)-1] != fmt.Sprintf("<|reserved_%d|>", len(tokens)-1-id["<|eot_id|>"]-1) {
		t.Errorf("last token %q", tokens[len(tokens)-1])
	}
	if _, ok := id[" the"]; ok || id["Ġthe"] == 0 {
		t.Errorf("common word \"Ġthe\" was not learned")
	}
}

func TestVocabGGUF(t *testing.T) {
	vp := shared.Models(t, "llama.cpp-vocab/ggml-vocab-llama3-bpe.gguf")
	f := open(t, write(t, synth.Options{Shape: "tiny", Type: "Q4_0", Seed: 1, VocabGGUF: vp}))
	v, err := gguf.Open(vp)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	if f.Config.Vocab != 128256 {
		t.Errorf("vocab %d, want 128256", f.Config.Vocab)
	}
	n := 0
	for _, kv := range v.KV {
		if !strings.HasPrefix(kv.Key, "tokenizer.") {
			continue
		}
		n++
		got, ok := f.GGUF.Get(kv.Key)
		if !ok || got.Type != kv.Value.Type || got.Len() != kv.Value.Len() || fmt.Sprint(got) != fmt.Sprint(kv.Value) {
			t.Errorf("%s not copied", kv.Key)
		}
	}
	if n < 5 {
		t.Errorf("only %d tokenizer keys in the vocabulary file", n)
	}
}

func TestOptionErrors(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		run  func() error
		want string
	}{
		{"unknown shape", func() error { return synth.WriteGGUF(filepath.Join(dir, "a"), synth.Options{Shape: "huge"}) }, `unknown shape "huge"`},
		{"unknown type", func() error {
			return synth.WriteGGUF(filepath.Join(dir, "b"), synth.Options{Shape: "tiny", Type: "IQ2_XXS"})
		}, `unknown type "IQ2_XXS"`},
		{"negative std", func() error {
			return synth.WriteGGUF(filepath.Join(dir, "c"), synth.Options{Shape: "tiny", Std: -1})
		}, "must be positive"},
		{"quantized HF", func() error {
			return synth.WriteHF(filepath.Join(dir, "d"), synth.Options{Shape: "tiny", Type: "Q8_0"})
		}, "cannot be stored in safetensors"},
		{"missing vocab", func() error {
			return synth.WriteGGUF(filepath.Join(dir, "e"), synth.Options{Shape: "tiny", VocabGGUF: filepath.Join(dir, "nope.gguf")})
		}, "nope.gguf"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.run()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to mention %q", err, tc.want)
			}
		})
	}
}
