package gguf

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"reflect"
	"regexp"
	"testing"

	"github.com/glint-llm/glint/dtype"
	"github.com/glint-llm/glint/internal/shared"
)

// Expectations below come from shared/models/MANIFEST.md, which was written
// from llama.cpp's gguf-py reader, not from this package.

func openShared(t *testing.T, rel string) *File {
	t.Helper()
	f, err := Open(shared.Models(t, rel))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func checkUints(t *testing.T, f *File, want map[string]uint64) {
	t.Helper()
	for k, w := range want {
		if got, err := f.Uint(k); err != nil || got != w {
			t.Errorf("%s = %d, %v; want %d", k, got, err, w)
		}
	}
}

func checkStrings(t *testing.T, f *File, want map[string]string) {
	t.Helper()
	for k, w := range want {
		if got, err := f.String(k); err != nil || got != w {
			t.Errorf("%s = %q, %v; want %q", k, got, err, w)
		}
	}
}

// typeCounts counts tensors by type.
func typeCounts(f *File) map[dtype.Type]int {
	m := map[dtype.Type]int{}
	for _, ti := range f.Tensors {
		m[ti.Type]++
	}
	return m
}

var layerTensor = regexp.MustCompile(`^blk\.[0-4]\.`)

func TestStories260K(t *testing.T) {
	f := openShared(t, "stories260K/stories260K.gguf")
	if f.Version != 3 || len(f.Tensors) != 48 {
		t.Fatalf("version %d, %d tensors; want 3, 48", f.Version, len(f.Tensors))
	}
	if c := typeCounts(f); c[dtype.F32] != 48 {
		t.Errorf("types %v, want 48 F32", c)
	}
	checkStrings(t, f, map[string]string{"general.architecture": "llama", "tokenizer.ggml.model": "llama"})
	checkUints(t, f, map[string]uint64{
		"llama.block_count": 5, "llama.embedding_length": 64, "llama.feed_forward_length": 172,
		"llama.attention.head_count": 8, "llama.attention.head_count_kv": 4, "llama.rope.dimension_count": 8,
		"llama.context_length": 2048, "tokenizer.ggml.bos_token_id": 1, "tokenizer.ggml.eos_token_id": 2,
		"tokenizer.ggml.unknown_token_id": 0,
	})
	if eps, err := f.Float("llama.attention.layer_norm_rms_epsilon"); err != nil || eps != float64(float32(1e-5)) {
		t.Errorf("rms eps = %v, %v", eps, err)
	}
	if _, ok := f.Get("llama.rope.freq_base"); ok {
		t.Error("llama.rope.freq_base present; the manifest says it is absent")
	}
	toks, err := f.Strings("tokenizer.ggml.tokens")
	if err != nil || len(toks) != 512 || toks[0] != "<unk>" || toks[1] != "<s>" || toks[2] != "</s>" {
		t.Errorf("tokens: %d, %v", len(toks), err)
	}
	if sc, err := f.Float32s("tokenizer.ggml.scores"); err != nil || len(sc) != 512 {
		t.Errorf("scores: %d, %v", len(sc), err)
	}

	shapes := map[string][]uint64{
		"token_embd.weight": {64, 512}, "output.weight": {64, 512}, "output_norm.weight": {64},
		"blk.0.attn_q.weight": {64, 64}, "blk.3.attn_k.weight": {64, 32}, "blk.4.attn_v.weight": {64, 32},
		"blk.1.ffn_gate.weight": {64, 172}, "blk.2.ffn_up.weight": {64, 172}, "blk.4.ffn_down.weight": {172, 64},
		"blk.0.attn_norm.weight": {64},
	}
	for name, dims := range shapes {
		ti, ok := f.Info(name)
		if !ok || !reflect.DeepEqual(ti.Dims, dims) {
			t.Errorf("%s: dims %v (present %v), want %v", name, ti.Dims, ok, dims)
		}
	}
	if ti, _ := f.Info("blk.4.ffn_down.weight"); !reflect.DeepEqual(ti.Shape(), []int{64, 172}) {
		t.Errorf("ffn_down shape %v, want [64 172]", ti.Shape())
	}
	emb, _, err := f.TensorData("token_embd.weight")
	if err != nil {
		t.Fatal(err)
	}
	out, _, _ := f.TensorData("output.weight")
	if len(emb) != 512*64*4 || !bytes.Equal(emb, out) {
		t.Errorf("output.weight is not byte-identical to token_embd.weight (%d bytes)", len(emb))
	}
	// A trained model's weights are finite and not all zero.
	norm, _, _ := f.TensorData("output_norm.weight")
	var sum float64
	for i := 0; i < len(norm); i += 4 {
		x := math.Float32frombits(binary.LittleEndian.Uint32(norm[i:]))
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			t.Fatalf("output_norm[%d] = %v", i/4, x)
		}
		sum += math.Abs(float64(x))
	}
	if sum == 0 {
		t.Error("output_norm is all zero")
	}
}

func TestStories260KQuantized(t *testing.T) {
	// Per-tensor types from the MANIFEST table (section 7).
	for _, c := range []struct {
		file, quant string
		q           dtype.Type
		output      dtype.Type
	}{
		{"stories260K/stories260K-Q8_0.gguf", "Q8_0", dtype.Q8_0, dtype.Q8_0},
		{"stories260K/stories260K-Q4_0.gguf", "Q4_0", dtype.Q4_0, dtype.Q8_0},
	} {
		t.Run(c.quant, func(t *testing.T) {
			f := openShared(t, c.file)
			if len(f.Tensors) != 48 {
				t.Fatalf("%d tensors", len(f.Tensors))
			}
			want := map[string]dtype.Type{"token_embd.weight": c.q, "output.weight": c.output, "output_norm.weight": dtype.F32}
			for l := range 5 {
				for _, n := range []string{"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up"} {
					want[fmt.Sprintf("blk.%d.%s.weight", l, n)] = c.q
				}
				want[fmt.Sprintf("blk.%d.ffn_down.weight", l)] = dtype.F16
				want[fmt.Sprintf("blk.%d.attn_norm.weight", l)] = dtype.F32
				want[fmt.Sprintf("blk.%d.ffn_norm.weight", l)] = dtype.F32
			}
			for _, ti := range f.Tensors {
				if want[ti.Name] != ti.Type {
					t.Errorf("%s is %v, want %v", ti.Name, ti.Type, want[ti.Name])
				}
				if name := ti.Name; len(name) > 4 && name[:4] == "blk." && !layerTensor.MatchString(name) {
					t.Errorf("unexpected tensor %s", name)
				}
			}
			checkUints(t, f, map[string]uint64{"general.quantization_version": 2})
		})
	}
}

func TestLlama3Small(t *testing.T) {
	f := openShared(t, "llama3-small/llama3-small-Q4_0.gguf")
	emb, ok := f.Info("token_embd.weight")
	if !ok || emb.Type != dtype.Q6_K || !reflect.DeepEqual(emb.Shape(), []int{128256, 256}) || emb.Size != 128256*210 {
		t.Errorf("token_embd.weight: %+v", emb)
	}
	if c := typeCounts(f); c[dtype.Q6_K] != 1 || c[dtype.Q4_0] != 14 || c[dtype.F32] != 6 || len(f.Tensors) != 21 {
		t.Errorf("types %v", c)
	}
	if f.Has("output.weight") {
		t.Error("output.weight present; embeddings are tied")
	}
}

func TestLlama3TinyRopeFreqs(t *testing.T) {
	f := openShared(t, "llama3-tiny/llama3-tiny-F16.gguf")
	td, err := f.Tensor("rope_freqs.weight")
	if err != nil {
		t.Fatal(err)
	}
	got := make([]float32, 8)
	if td.Type != dtype.F32 || len(td.Data) != 32 {
		t.Fatalf("rope_freqs: %v %v", td.Type, td.Shape)
	}
	dtype.DequantizeRow(td.Type, got, td.Data)
	// The manifest prints 7 significant digits.
	want := []float64{1, 1, 1, 1, 3.292263, 32, 32, 32}
	for i := range want {
		if math.Abs(float64(got[i])-want[i]) > 1e-6*want[i] {
			t.Errorf("rope_freqs[%d] = %v, want %v", i, got[i], want[i])
		}
	}
	if x, err := f.Float("llama.rope.freq_base"); err != nil || x != 500000 {
		t.Errorf("freq_base = %v, %v", x, err)
	}
}

func TestVocabLlama3(t *testing.T) {
	f := openShared(t, "llama.cpp-vocab/ggml-vocab-llama3-bpe.gguf")
	if len(f.Tensors) != 0 || f.Version != 3 {
		t.Errorf("version %d, %d tensors", f.Version, len(f.Tensors))
	}
	toks, err := f.Strings("tokenizer.ggml.tokens")
	if err != nil || len(toks) != 128256 {
		t.Fatalf("tokens: %d, %v", len(toks), err)
	}
	if toks[128000] != "<|begin_of_text|>" || toks[128255] != "<|reserved_special_token_247|>" {
		t.Errorf("specials: %q, %q", toks[128000], toks[128255])
	}
	merges, err := f.Strings("tokenizer.ggml.merges")
	if err != nil || len(merges) != 280147 {
		t.Errorf("merges: %d, %v", len(merges), err)
	}
	types, err := f.Int32s("tokenizer.ggml.token_type")
	if err != nil || len(types) != 128256 || types[0] != 1 || types[127999] != 1 || types[128000] != 3 {
		t.Errorf("token types: %d, %v", len(types), err)
	}
	checkStrings(t, f, map[string]string{"tokenizer.ggml.model": "gpt2", "tokenizer.ggml.pre": "llama-bpe"})
	checkUints(t, f, map[string]uint64{"tokenizer.ggml.bos_token_id": 128000, "tokenizer.ggml.eos_token_id": 128001})
	if b, err := f.Bool("tokenizer.ggml.add_bos_token"); err != nil || !b {
		t.Errorf("add_bos = %v, %v", b, err)
	}
}

func TestOllamaTinyRandom(t *testing.T) {
	f := openShared(t, "ollama-testdata/llama-2-tiny-random.gguf")
	if c := typeCounts(f); len(f.Tensors) != 12 || c[dtype.F16] != 9 || c[dtype.F32] != 3 {
		t.Errorf("%d tensors, types %v", len(f.Tensors), c)
	}
	checkUints(t, f, map[string]uint64{
		"general.file_type": 1, "llama.block_count": 1, "llama.embedding_length": 8, "llama.feed_forward_length": 32,
		"llama.attention.head_count": 2, "llama.attention.head_count_kv": 2, "llama.rope.dimension_count": 4,
		"llama.context_length": 4096, "tokenizer.ggml.bos_token_id": 1, "tokenizer.ggml.eos_token_id": 2,
	})
	if toks, err := f.Strings("tokenizer.ggml.tokens"); err != nil || len(toks) != 32000 {
		t.Errorf("tokens: %d, %v", len(toks), err)
	}
}

// TestRewriteIdentical copies files made by llama.cpp and gguf-py through
// Writer (metadata as Values, tensors by name) and expects the very same
// bytes: an independent check of the writer's layout and encodings.
func TestRewriteIdentical(t *testing.T) {
	for _, rel := range []string{
		"stories260K/stories260K.gguf",
		"stories260K/stories260K-Q4_0.gguf",
		"llama3-small/llama3-small-Q4_0.gguf",
		"llama.cpp-vocab/ggml-vocab-llama-spm.gguf",
		"ollama-testdata/llama-2-tiny-random.gguf",
	} {
		t.Run(rel, func(t *testing.T) {
			f := openShared(t, rel)
			w := NewWriter()
			for _, kv := range f.KV {
				must(t, w.Add(kv.Key, kv.Value))
			}
			for _, ti := range f.Tensors {
				td, err := f.Tensor(ti.Name)
				if err != nil {
					t.Fatal(err)
				}
				must(t, w.AddTensor(td.Name, td.Type, td.Shape, td.Data))
			}
			var buf bytes.Buffer
			if _, err := w.WriteTo(&buf); err != nil {
				t.Fatal(err)
			}
			orig, err := os.ReadFile(f.Path)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(buf.Bytes(), orig) {
				n := 0
				for n < min(buf.Len(), len(orig)) && buf.Bytes()[n] == orig[n] {
					n++
				}
				t.Fatalf("rewrite differs from the original at byte %d (%d vs %d bytes)", n, buf.Len(), len(orig))
			}
		})
	}
}

func BenchmarkOpenVocab(b *testing.B) {
	path := shared.Models(b, "llama.cpp-vocab/ggml-vocab-llama3-bpe.gguf")
	for b.Loop() {
		f, err := Open(path)
		if err != nil {
			b.Fatal(err)
		}
		toks, err1 := f.Strings("tokenizer.ggml.tokens")
		merges, err2 := f.Strings("tokenizer.ggml.merges")
		if err1 != nil || err2 != nil || len(toks)+len(merges) != 128256+280147 {
			b.Fatal(err1, err2)
		}
		f.Close()
	}
}
