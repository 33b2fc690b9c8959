package load_test

import (
	"bytes"
	"maps"
	"math"
	"os"
	"path/filepath"
	"runtime"
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

// TestOpenStagedGGUF checks the configs of the staged files against the
// hyper-parameters MANIFEST.md lists for them.
func TestOpenStagedGGUF(t *testing.T) {
	llama3tiny := model.Config{Arch: "llama", NLayer: 2, NEmbd: 64, NHead: 4, NHeadKV: 2, HeadDim: 16, NFF: 128, Vocab: 128256,
		Context: 2048, RMSEps: 1e-5, RopeTheta: 500000, RopeDims: 16, HasRopeFreqs: true, TiedEmbeddings: true}
	stories := model.Config{Arch: "llama", NLayer: 5, NEmbd: 64, NHead: 8, NHeadKV: 4, HeadDim: 8, NFF: 172, Vocab: 512,
		Context: 2048, RMSEps: 1e-5, RopeTheta: 10000, RopeDims: 8}
	small := llama3tiny
	small.NEmbd, small.HeadDim, small.RopeDims, small.NFF = 256, 64, 64, 512
	for _, tc := range []struct {
		file string
		want model.Config
	}{
		{"stories260K/stories260K.gguf", stories},
		{"stories260K/stories260K-Q4_0.gguf", stories},
		{"llama3-tiny/llama3-tiny-F16.gguf", llama3tiny},
		{"llama3-tiny/llama3-tiny-Q8_0.gguf", llama3tiny},
		{"llama3-small/llama3-small-Q4_0.gguf", small},
		{"ollama-testdata/llama-2-tiny-random.gguf", model.Config{Arch: "llama", NLayer: 1, NEmbd: 8, NHead: 2, NHeadKV: 2,
			HeadDim: 4, NFF: 32, Vocab: 32000, Context: 4096, RMSEps: 1e-5, RopeTheta: 10000, RopeDims: 4}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			f, err := load.Open(shared.Models(t, tc.file))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if f.Config != tc.want {
				t.Errorf("got  %+v\nwant %+v", f.Config, tc.want)
			}
			if f.GGUF == nil || f.Dir != "" || f.Source == nil {
				t.Errorf("File fields: GGUF %v Dir %q", f.GGUF != nil, f.Dir)
			}
		})
	}
}

// ggufWith writes a small llama GGUF (synth's tiny shape, via the real
// writer) with some keys dropped or overridden and tensors reshaped, to
// produce each malformed file.
func ggufWith(t testing.TB, drop []string, set map[string]any, reshape map[string][]int) string {
	t.Helper()
	dir := t.TempDir()
	base := filepath.Join(dir, "base.gguf")
	if err := synth.WriteGGUF(base, synth.Options{Shape: "tiny", Seed: 1}); err != nil {
		t.Fatal(err)
	}
	src, err := gguf.Open(base)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	w := gguf.NewWriter()
	seen := map[string]bool{}
	for _, kv := range src.KV {
		if strings.Contains(strings.Join(drop, "\n")+"\n", kv.Key+"\n") {
			continue
		}
		v := any(kv.Value)
		if s, ok := set[kv.Key]; ok {
			v, seen[kv.Key] = s, true
		}
		if err := w.Add(kv.Key, v); err != nil {
			t.Fatal(err)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(set)) {
		if !seen[k] {
			if err := w.Add(k, set[k]); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, ti := range src.Tensors {
		shape, data := ti.Shape(), must(src.Tensor(ti.Name)).Data
		if s, ok := reshape[ti.Name]; ok {
			shape = s
			data = make([]byte, must(ti.Type.Bytes(s...)))
		}
		if err := w.AddTensor(ti.Name, ti.Type, shape, data); err != nil {
			t.Fatal(err)
		}
	}
	p := filepath.Join(dir, "bad.gguf")
	if err := w.WriteFile(p); err != nil {
		t.Fatal(err)
	}
	return p
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func TestConfigFromGGUFErrors(t *testing.T) {
	for _, tc := range []struct {
		name    string
		drop    []string
		set     map[string]any
		reshape map[string][]int
		want    string
	}{
		{"architecture", nil, map[string]any{"general.architecture": "mamba"}, nil,
			`unsupported architecture "mamba" (supported: llama, qwen2, qwen3, gemma2, gemma3, phi3, gpt2)`},
		{"rope scaling", nil, map[string]any{"llama.rope.scaling.type": "yarn", "llama.rope.scaling.factor": float32(4)}, nil,
			`rope scaling "yarn" with factor 4 is not supported`},
		{"no architecture", []string{"general.architecture"}, nil, nil, "general.architecture"},
		{"missing keys", []string{"llama.block_count", "llama.embedding_length"}, nil, nil, "llama.embedding_length"},
		{"gqa", nil, map[string]any{"llama.attention.head_count_kv": uint32(3)}, nil, "not a multiple of 3 KV heads"},
		{"wrong type", nil, map[string]any{"llama.block_count": "two"}, nil, "llama.block_count"},
		{"embedding shape", nil, nil, map[string][]int{"token_embd.weight": {100, 64}}, `"token_embd.weight" has shape [100 64], want [512 64]`},
		{"layer shape", nil, nil, map[string][]int{"blk.1.ffn_up.weight": {64, 64}}, `"blk.1.ffn_up.weight" has shape`},
		{"vocab key", nil, map[string]any{"llama.vocab_size": uint32(600)}, nil, `"token_embd.weight" has shape [512 64], want [600 64]`},
		{"value length", nil, map[string]any{"llama.attention.value_length": uint32(8)}, nil, "value length 8"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := ggufWith(t, tc.drop, tc.set, tc.reshape)
			f, err := load.Open(p)
			if err == nil {
				f.Close()
				t.Fatal("opened")
			}
			if !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), p) {
				t.Fatalf("err = %v, want it to name the file and mention %q", err, tc.want)
			}
		})
	}
	// Linear scaling: the angles divided by the factor.
	lin := ggufWith(t, nil, map[string]any{"llama.rope.scaling.type": "linear", "llama.rope.scaling.factor": float32(4)}, nil)
	if f, err := load.Open(lin); err != nil || f.Config.RopeFreqScale != 0.25 {
		t.Errorf("linear scaling: %v, %+v", err, f)
	} else {
		f.Close()
	}
	// Defaults: no head_count_kv, freq_base, key_length, dimension_count or
	// vocab_size (taken from the token list).
	p := ggufWith(t, []string{"llama.attention.head_count_kv", "llama.rope.freq_base", "llama.attention.key_length",
		"llama.attention.value_length", "llama.rope.dimension_count", "llama.vocab_size"}, nil,
		map[string][]int{"blk.0.attn_k.weight": {64, 64}, "blk.0.attn_v.weight": {64, 64}, "blk.1.attn_k.weight": {64, 64},
			"blk.1.attn_v.weight": {64, 64}, "rope_freqs.weight": {8}})
	f, err := load.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if c := f.Config; c.NHeadKV != 4 || c.RopeTheta != 10000 || c.HeadDim != 16 || c.RopeDims != 16 || c.Vocab != 512 {
		t.Errorf("defaults: %+v", c)
	}
}

func TestOpenHF(t *testing.T) {
	dir := t.TempDir()
	if err := synth.WriteHF(dir, synth.Options{Shape: "tiny", Type: "BF16", Seed: 2}); err != nil {
		t.Fatal(err)
	}
	f, err := load.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := must(must(synth.LookupShape("tiny")).Config("llama"))
	want.RopeNeoX = true
	if f.Config != want || f.GGUF != nil || f.Dir != dir {
		t.Errorf("config %+v, want %+v", f.Config, want)
	}
	td := must(f.Source.Tensor("blk.1.attn_q.weight"))
	if td.Type != dtype.BF16 || td.Name != "blk.1.attn_q.weight" {
		t.Errorf("attn_q: %v %q", td.Type, td.Name)
	}
	rf := must(f.Source.Tensor("rope_freqs.weight"))
	if rf.Type != dtype.F32 || len(rf.Data) != 4*8 {
		t.Errorf("rope_freqs: %v %d bytes", rf.Type, len(rf.Data))
	}
	if f.Source.Has("output.weight") || !f.Source.Has("token_embd.weight") {
		t.Error("tied model exposes output.weight or hides token_embd.weight")
	}
	f.Close()

	for _, tc := range []struct {
		name   string
		mangle func(dir string)
		want   string
	}{
		{"no config", func(d string) { os.Remove(filepath.Join(d, "config.json")) }, "not a GGUF file or Hugging Face folder"},
		{"no weights", func(d string) { os.Remove(filepath.Join(d, "model.safetensors")) }, "model.safetensors"},
		{"wrong vocab", func(d string) {
			b, _ := os.ReadFile(filepath.Join(d, "config.json"))
			os.WriteFile(filepath.Join(d, "config.json"), []byte(strings.Replace(string(b), `"vocab_size": 512`, `"vocab_size": 500`, 1)), 0o644)
		}, `"token_embd.weight" has shape [512 64], want [500 64]`},
		{"1e7 layers", func(d string) {
			b, _ := os.ReadFile(filepath.Join(d, "config.json"))
			os.WriteFile(filepath.Join(d, "config.json"), []byte(strings.Replace(string(b), `"num_hidden_layers": 2`, `"num_hidden_layers": 10000000`, 1)), 0o644)
		}, `"blk.2.attn_norm.weight" is missing`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := t.TempDir()
			if err := synth.WriteHF(d, synth.Options{Shape: "tiny", Seed: 2}); err != nil {
				t.Fatal(err)
			}
			tc.mangle(d)
			f, err := load.Open(d)
			if err == nil {
				f.Close()
				t.Fatal("opened")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to mention %q", err, tc.want)
			}
		})
	}
	if _, err := load.Open(filepath.Join(dir, "absent.gguf")); err == nil {
		t.Error("opened a missing file")
	}
}

// TestHostileHyperParameters: a small file claiming millions of layers or a
// billion-token context is refused by name, without allocating per layer
// (TensorShapes for 1e7 layers would be gigabytes). The limit is far above
// what opening the 100 KB file takes.
func TestHostileHyperParameters(t *testing.T) {
	const limit = 64 << 20
	for _, tc := range []struct {
		name string
		set  map[string]any
		want string
	}{
		{"1e6 layers", map[string]any{"llama.block_count": uint32(1e6)}, "llama.block_count 1000000 exceeds what the file's 21 tensors can hold (9 per layer)"},
		{"1e7 layers", map[string]any{"llama.block_count": uint32(1e7)}, "llama.block_count 10000000 exceeds what the file's 21 tensors can hold"},
		{"2^31-1 layers", map[string]any{"llama.block_count": uint32(math.MaxInt32)}, "llama.block_count 2147483647 exceeds"},
		{"3 layers", map[string]any{"llama.block_count": uint32(3)}, "llama.block_count 3 exceeds what the file's 21 tensors can hold"},
		{"2^32 layers", map[string]any{"llama.block_count": uint64(1 << 32)}, "llama.block_count = 4294967296 is out of range"},
		{"1e9 context", map[string]any{"llama.context_length": uint32(1e9)}, "context 1000000000 is more than glint supports (16777216)"},
		{"1e9 heads", map[string]any{"llama.attention.head_count": uint32(1e9), "llama.attention.head_count_kv": uint32(1e9)}, `"blk.0.attn_q.weight" has shape [64 64], want [16000000000 64]`},
		{"1e9 vocab", map[string]any{"llama.vocab_size": uint32(1e9)}, `"token_embd.weight" has shape [512 64], want [1000000000 64]`},
		{"1e9 embedding", map[string]any{"llama.embedding_length": uint32(1e9)}, `"token_embd.weight" has shape [512 64], want [512 1000000000]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := ggufWith(t, nil, tc.set, nil)
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			f, err := load.Open(p)
			runtime.ReadMemStats(&after)
			if err == nil {
				f.Close()
				t.Fatal("opened")
			}
			if !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), p) {
				t.Fatalf("err = %v, want it to name the file and mention %q", err, tc.want)
			}
			if n := after.TotalAlloc - before.TotalAlloc; n > limit {
				t.Fatalf("refusing it allocated %d bytes", n)
			}
		})
	}
}

// FuzzConfigFromGGUF: whatever a file's header claims, ConfigFromGGUF
// returns a config or an error, never a panic, and a config it returns
// matches the file's tensors. The seeds are a one-layer model small enough
// for the fuzzer to mutate quickly, and that model claiming 1e7 layers or
// a 1e9-token context.
func FuzzConfigFromGGUF(f *testing.F) {
	c, err := model.Config{Arch: "llama", NLayer: 1, NEmbd: 8, NHead: 2, NHeadKV: 1, HeadDim: 4, NFF: 8, Vocab: 4,
		Context: 16, RMSEps: 1e-5, RopeTheta: 1e4, RopeDims: 4, TiedEmbeddings: true}.WithArch()
	if err != nil {
		f.Fatal(err)
	}
	for _, edit := range []func(kvs []gguf.KV){nil,
		func(kvs []gguf.KV) { kvs[0].Value = must(gguf.NewValue(uint32(1e7))) },
		func(kvs []gguf.KV) { kvs[1].Value = must(gguf.NewValue(uint32(1e9))) },
	} {
		kvs := must(gguf.HParams(c))
		if edit != nil {
			edit(kvs)
		}
		w := gguf.NewWriter()
		if err := w.Add("general.architecture", "llama"); err != nil {
			f.Fatal(err)
		}
		for _, kv := range kvs {
			if err := w.Add(kv.Key, kv.Value); err != nil {
				f.Fatal(err)
			}
		}
		for _, ts := range c.TensorShapes() {
			if err := w.AddTensor(ts.Name, dtype.F32, ts.Shape, make([]byte, must(dtype.F32.Bytes(ts.Shape...)))); err != nil {
				f.Fatal(err)
			}
		}
		var b bytes.Buffer
		if _, err := w.WriteTo(&b); err != nil {
			f.Fatal(err)
		}
		f.Add(b.Bytes())
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		g, err := gguf.Parse(data)
		if err != nil {
			return
		}
		c, err := load.ConfigFromGGUF(g)
		if err != nil {
			return
		}
		if err := c.CheckSource(g); err != nil || c.TensorCount() > len(g.Tensors) {
			t.Fatalf("accepted config %+v does not match the file: %v", c, err)
		}
	})
}
