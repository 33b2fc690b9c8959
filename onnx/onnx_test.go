package onnx

import (
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/glint-llm/glint/engine"
	"github.com/glint-llm/glint/internal/shared"
	"github.com/glint-llm/glint/onnx/onnxtest"
)

// open skips the test when no ONNX Runtime library is installed (CI runs
// make onnxruntime first); every other failure is a test failure.
func open(t testing.TB, dir string) *Model {
	t.Helper()
	if _, err := findLibrary(""); err != nil {
		t.Skipf("ONNX Runtime not installed: run make onnxruntime")
	}
	m, err := Open(dir, Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

func gemmaDir(t testing.TB, o onnxtest.GemmaOptions) string {
	t.Helper()
	dir := t.TempDir()
	if err := onnxtest.WriteGemmaLike(dir, o); err != nil {
		t.Fatal(err)
	}
	return dir
}

func logits(t testing.TB, m *Model) []float32 {
	t.Helper()
	out := make([]float32, m.Vocab())
	if err := m.Logits(0, out); err != nil {
		t.Fatal(err)
	}
	return out
}

func maxDiff(a, b []float32) float64 {
	d := 0.0
	for i := range a {
		d = max(d, math.Abs(float64(a[i]-b[i])))
	}
	return d
}

func greedy(t testing.TB, m *Model, prompt []int32, n int) []int32 {
	t.Helper()
	m.Reset()
	if err := m.Eval(prompt); err != nil {
		t.Fatal(err)
	}
	var out []int32
	for i := 0; i < n; i++ {
		id := make([]int32, 1)
		if err := m.Argmax(id); err != nil {
			t.Fatal(err)
		}
		out = append(out, id[0])
		if i+1 < n {
			if err := m.Eval(id); err != nil {
				t.Fatal(err)
			}
		}
	}
	return out
}

// expected is tiny-random-gpt2-fp32/expected_outputs.json, transcribed from
// onnxruntime-genai's C API tests.
type expected struct {
	InputIDs [][]int32 `json:"input_ids"`
	Greedy   struct {
		MaxLength int       `json:"max_length"`
		Sequences [][]int32 `json:"expected_sequences"`
	} `json:"greedy"`
	Prompt struct {
		Values []float32 `json:"values"`
	} `json:"prompt_logits_sampled"`
	TokenGen struct {
		Values []float32 `json:"values"`
	} `json:"token_gen_logits_sampled"`
}

func TestGPT2Reference(t *testing.T) {
	dir := shared.Models(t, "onnx-genai-test/tiny-random-gpt2-fp32")
	data, err := os.ReadFile(filepath.Join(dir, "expected_outputs.json"))
	if err != nil {
		t.Fatal(err)
	}
	var want expected
	if err := json.Unmarshal(data, &want); err != nil {
		t.Fatal(err)
	}
	m := open(t, dir)
	if i := m.Info(); !i.KVStacked || i.IDType != "int32" || i.Layers != 5 || i.KVHeads != 4 || i.HeadDim != 8 {
		t.Fatalf("info %+v: want stacked int32 KV, 5 layers × 4 heads × 8", i)
	}
	batch := len(want.InputIDs)
	seq := len(want.InputIDs[0])
	v := m.Vocab()
	// Each batch row is run as its own sequence: the rows hold no pad id
	// (98), so the reference's attention mask is all ones, as ours is.
	for b, prompt := range want.InputIDs {
		got := greedy(t, m, prompt, want.Greedy.MaxLength-len(prompt))
		if w := want.Greedy.Sequences[b][len(prompt):]; !slices.Equal(got, w) {
			t.Errorf("row %d: greedy %v, want %v", b, got, w)
		}

		m.Reset()
		if err := m.Eval(prompt); err != nil {
			t.Fatal(err)
		}
		all := m.allLogits(len(prompt))
		// Sampled values are at flat index i*200 of the [batch, seq, vocab]
		// logits; tolerance 1e-3 as in the reference test.
		for i, w := range want.Prompt.Values {
			f := i * 200
			if f/(seq*v) != b {
				continue
			}
			if got := all[f%(seq*v)]; math.Abs(float64(got-w)) > 1e-3 {
				t.Errorf("row %d prompt logit at flat %d: %g, want %g", b, f, got, w)
			}
		}
		// After the second generation step the logits are those of the
		// first generated token, [batch, 1, vocab], sampled the same way.
		if err := m.Eval(want.Greedy.Sequences[b][len(prompt) : len(prompt)+1]); err != nil {
			t.Fatal(err)
		}
		last := logits(t, m)
		for i, w := range want.TokenGen.Values {
			f := i * 200
			if f/v != b {
				continue
			}
			if got := last[f%v]; math.Abs(float64(got-w)) > 1e-3 {
				t.Errorf("row %d generation logit at flat %d: %g, want %g", b, f, got, w)
			}
		}
	}
	if batch != 2 {
		t.Fatalf("expected_outputs.json has %d rows, want 2", batch)
	}
}

// allLogits reads every row of the last pass's logits (float32 models).
func (m *Model) allLogits(n int) []float32 {
	out := make([]float32, n*m.info.Vocab)
	for i := range out {
		out[i] = math.Float32frombits(uint32(m.logitBuf[4*i]) | uint32(m.logitBuf[4*i+1])<<8 |
			uint32(m.logitBuf[4*i+2])<<16 | uint32(m.logitBuf[4*i+3])<<24)
	}
	return out
}

// TestPrefillMatchesSteps checks the cache plumbing: a prompt in one pass
// and the same tokens one at a time must give the same last logits. The
// float32 tolerance of 1e-4 covers summation-order differences between a
// batched and a single-row MatMul; float16 caches round every K and V to 11
// bits (and the Qwen test graph computes in float16 throughout), so their
// tolerance is 2e-2 on logits of magnitude ~5.
func TestPrefillMatchesSteps(t *testing.T) {
	prompt := []int32{onnxtest.BOSID, 270, 280, 7, 300, 262, 263, 290}
	cases := []struct {
		name string
		dir  func(t *testing.T) string
		ids  []int32
		tol  float64
	}{
		{"gemma-like", func(t *testing.T) string { return sharedGemma(t) }, prompt, 1e-4},
		{"gemma-like-external", func(t *testing.T) string {
			return gemmaDir(t, onnxtest.GemmaOptions{Seed: 2, Layers: 4, ExternalData: "model.onnx_data"})
		}, prompt, 1e-4},
		{"gemma-like-f16-kv", func(t *testing.T) string {
			return gemmaDir(t, onnxtest.GemmaOptions{Seed: 3, Float16KV: true, Layers: 4})
		}, prompt, 2e-2},
		{"qwen-f16-gqa", func(t *testing.T) string {
			return shared.Models(t, "onnx-genai-test/tiny-qwen35-cuda")
		}, []int32{1, 0, 195, 731, 5, 17}, 2e-2},
		{"gpt2-stacked-int32", func(t *testing.T) string {
			return shared.Models(t, "onnx-genai-test/tiny-random-gpt2-fp32")
		}, []int32{0, 0, 195, 731, 5, 17}, 1e-4},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := open(t, c.dir(t))
			if err := m.Eval(c.ids); err != nil {
				t.Fatal(err)
			}
			whole := logits(t, m)
			m.Reset()
			for i, id := range c.ids {
				if err := m.Eval([]int32{id}); err != nil {
					t.Fatal(err)
				}
				if m.Pos() != i+1 {
					t.Fatalf("Pos %d after %d tokens", m.Pos(), i+1)
				}
			}
			if d := maxDiff(whole, logits(t, m)); d > c.tol {
				t.Errorf("prefill vs token-by-token: max |Δlogit| %g > %g", d, c.tol)
			} else {
				t.Logf("prefill vs token-by-token: max |Δlogit| %g", d)
			}
			// A second run from Reset is bit-identical (one thread, same
			// inputs, same kernels).
			m.Reset()
			if err := m.Eval(c.ids); err != nil {
				t.Fatal(err)
			}
			if d := maxDiff(whole, logits(t, m)); d != 0 {
				t.Errorf("rerun differs by %g", d)
			}
		})
	}
}

// TestInputsMatter shows that the past, the position ids and the attention
// mask each reach the computation: perturbing any of them moves the logits
// far beyond rounding, while the unperturbed step reproduces them exactly.
func TestInputsMatter(t *testing.T) {
	m := open(t, gemmaDir(t, onnxtest.GemmaOptions{Seed: 4, Layers: 3}))
	prompt := []int32{onnxtest.BOSID, 270, 280, 300, 290}
	if err := m.Eval(prompt[:4]); err != nil {
		t.Fatal(err)
	}
	last := prompt[4:]
	run := func(pos, mask []int64, usePast bool) []float32 {
		if err := m.step(last, pos, mask, usePast); err != nil {
			t.Fatal(err)
		}
		return logits(t, m)
	}
	base := run([]int64{4}, nil, true)
	if d := maxDiff(base, run([]int64{4}, nil, true)); d != 0 {
		t.Fatalf("same step twice differs by %g", d)
	}
	for _, c := range []struct {
		name string
		got  []float32
	}{
		{"position 5 instead of 4", run([]int64{5}, nil, true)},
		{"no past", run([]int64{4}, nil, false)},
		{"mask hides token 1", run(nil, []int64{1, 0, 1, 1, 1}, true)},
	} {
		if d := maxDiff(base, c.got); d < 1e-2 {
			t.Errorf("%s: logits moved only %g", c.name, d)
		}
	}
	// The perturbed runs must not have touched the cache.
	if m.Pos() != 4 {
		t.Fatalf("Pos %d after probing, want 4", m.Pos())
	}
	if err := m.Eval(last); err != nil {
		t.Fatal(err)
	}
	if d := maxDiff(base, logits(t, m)); d != 0 {
		t.Errorf("Eval after probes differs from the probe baseline by %g", d)
	}
}

func TestGemmaInfo(t *testing.T) {
	m := open(t, sharedGemma(t))
	i := m.Info()
	if i.Layers != 18 || i.KVHeads != 1 || i.HeadDim != 256 || i.KVType != "float32" || i.KVStacked ||
		i.IDType != "int64" || m.Vocab() != 320 || m.Context() != 512 || i.BOS != onnxtest.BOSID ||
		!slices.Equal(i.EOS, []int32{onnxtest.EOSID, onnxtest.EndOfTurnID}) || !i.HasMask || !i.HasPosIDs {
		t.Fatalf("info %+v", i)
	}
}

// TestDummyDecoder binds the GenAI I/O stub (int32 ids, int64 mask and
// positions, one split KV layer) and runs it: its outputs are constants, so
// only the plumbing is checked.
func TestDummyDecoder(t *testing.T) {
	m := open(t, shared.Models(t, "onnx-genai-test/dummy-decoder"))
	i := m.Info()
	if i.Layers != 1 || i.KVHeads != 2 || i.HeadDim != 4 || i.IDType != "int32" || m.Vocab() != 32 || i.KVStacked {
		t.Fatalf("info %+v", i)
	}
	// The stub's logits are a fixed [2, 2, 32] constant whatever the input,
	// so a batch-1 run must fail cleanly, naming the output, and leave the
	// cache where it was.
	err := m.Eval([]int32{1, 2, 3})
	if err == nil || !strings.Contains(err.Error(), "logits") {
		t.Fatalf("Eval on the stub: %v, want an error about logits", err)
	}
	if m.Pos() != 0 {
		t.Errorf("failed Eval moved Pos to %d", m.Pos())
	}
}

func TestEvalErrors(t *testing.T) {
	m := open(t, gemmaDir(t, onnxtest.GemmaOptions{Layers: 1, MaxPos: 8}))
	if err := m.Argmax(make([]int32, 1)); err == nil {
		t.Error("Argmax before Eval: no error")
	}
	if err := m.Logits(0, make([]float32, m.Vocab())); err == nil {
		t.Error("Logits before Eval: no error")
	}
	for _, c := range []struct {
		ids  []int32
		want string
	}{
		{nil, "no tokens"},
		{[]int32{1, int32(m.Vocab())}, "outside the vocabulary"},
		{[]int32{-1}, "outside the vocabulary"},
		{make([]int32, 9), "exceed the context of 8"},
	} {
		if err := m.Eval(c.ids); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Eval(%v): %v, want %q", c.ids, err, c.want)
		}
	}
	if m.Pos() != 0 {
		t.Errorf("failed Evals moved Pos to %d", m.Pos())
	}
	if err := m.Eval(make([]int32, 8)); err != nil {
		t.Fatal(err)
	}
	if err := m.Logits(0, make([]float32, 3)); err == nil {
		t.Error("Logits into a short slice: no error")
	}
	for _, c := range []struct {
		batch []engine.Item
		want  string
	}{
		{[]engine.Item{{Token: 1, Pos: 8, Seq: 1}}, "one sequence"},
		{[]engine.Item{{Token: 1, Pos: 3}}, "must continue the cache at 8"},
	} {
		if err := m.Decode(c.batch); !errors.Is(err, engine.ErrUnsupported) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Decode(%v): %v, want ErrUnsupported saying %q", c.batch, err, c.want)
		}
	}
	if err := m.SeqShift(0, 0, -1, 1); !errors.Is(err, engine.ErrUnsupported) {
		t.Errorf("SeqShift: %v, want ErrUnsupported", err)
	}
	if err := m.SeqRemove(0, 2, 4); !errors.Is(err, engine.ErrUnsupported) {
		t.Errorf("SeqRemove of the middle: %v, want ErrUnsupported", err)
	}
}

// TestSeqRemoveSuffix: dropping the cache's last positions (the engine's
// Truncate) repacks every past buffer, so feeding the dropped tokens again
// gives the logits of the first run, bit for bit (one thread, the same
// inputs and kernels), through Decode with outputs on chosen rows.
func TestSeqRemoveSuffix(t *testing.T) {
	m := open(t, gemmaDir(t, onnxtest.GemmaOptions{Seed: 5, Layers: 2}))
	ids := []int32{onnxtest.BOSID, 270, 280, 300, 290, 310}
	batch := func(from int) []engine.Item {
		var b []engine.Item
		for i := from; i < len(ids); i++ {
			b = append(b, engine.Item{Token: ids[i], Pos: int32(i), Output: i == 4 || i == len(ids)-1})
		}
		return b
	}
	if err := m.Decode(batch(0)); err != nil {
		t.Fatal(err)
	}
	first, last := make([]float32, m.Vocab()), make([]float32, m.Vocab())
	if err := m.Logits(0, first); err != nil {
		t.Fatal(err)
	}
	if err := m.Logits(1, last); err != nil {
		t.Fatal(err)
	}
	if err := m.SeqRemove(0, 3, -1); err != nil {
		t.Fatal(err)
	}
	if m.SeqPosMax(0) != 2 {
		t.Fatalf("SeqPosMax %d after dropping from 3", m.SeqPosMax(0))
	}
	if err := m.Decode(batch(3)); err != nil {
		t.Fatal(err)
	}
	for i, want := range [][]float32{first, last} {
		got := make([]float32, m.Vocab())
		if err := m.Logits(i, got); err != nil {
			t.Fatal(err)
		}
		if d := maxDiff(want, got); d != 0 {
			t.Errorf("output %d after the truncation differs by %g", i, d)
		}
	}
}

// kvMismatchModel writes a one-layer graph whose present key comes from the
// past value: head dim 8 in, 4 out.
func kvMismatchModel(t *testing.T) string {
	dir := t.TempDir()
	dims := func(seq string, hd int64) []onnxtest.Dim {
		return []onnxtest.Dim{onnxtest.P("batch"), onnxtest.N(1), onnxtest.P(seq), onnxtest.N(hd)}
	}
	m := onnxtest.Model{Graph: onnxtest.Graph{
		Name: "kv_mismatch",
		Inputs: []onnxtest.ValueInfo{
			{Name: "input_ids", Type: onnxtest.Int64, Dims: []onnxtest.Dim{onnxtest.P("batch"), onnxtest.P("seq")}},
			{Name: "past_key_values.0.key", Type: onnxtest.Float, Dims: dims("past", 8)},
			{Name: "past_key_values.0.value", Type: onnxtest.Float, Dims: dims("past", 4)},
		},
		Outputs: []onnxtest.ValueInfo{
			{Name: "logits", Type: onnxtest.Float, Dims: []onnxtest.Dim{onnxtest.P("batch"), onnxtest.P("seq"), onnxtest.N(1)}},
			{Name: "present.0.key", Type: onnxtest.Float, Dims: dims("total", 4)},
			{Name: "present.0.value", Type: onnxtest.Float, Dims: dims("total", 4)},
		},
		Init: []*onnxtest.Tensor{{Name: "axis2", Type: onnxtest.Int64, Dims: []int64{1}, Int64: []int64{2}}},
		Nodes: []onnxtest.Node{
			{Op: "Unsqueeze", In: []string{"input_ids", "axis2"}, Out: []string{"ids3"}},
			{Op: "Cast", In: []string{"ids3"}, Out: []string{"logits"}, Attrs: []onnxtest.Attr{onnxtest.AttrInt("to", int64(onnxtest.Float))}},
			{Op: "Identity", In: []string{"past_key_values.0.value"}, Out: []string{"present.0.key"}},
			{Op: "Identity", In: []string{"past_key_values.0.value"}, Out: []string{"present.0.value"}},
		},
	}}
	if err := m.Write(filepath.Join(dir, "model.onnx"), ""); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestOpenErrors(t *testing.T) {
	if _, err := findLibrary(""); err != nil {
		t.Skipf("ONNX Runtime not installed: run make onnxruntime")
	}
	noONNX := t.TempDir()
	os.WriteFile(filepath.Join(noONNX, "config.json"), []byte(`{"vocab_size": 10}`), 0o644)
	twoONNX := t.TempDir()
	os.WriteFile(filepath.Join(twoONNX, "a.onnx"), nil, 0o644)
	os.WriteFile(filepath.Join(twoONNX, "b.onnx"), nil, 0o644)
	missingExt := gemmaDir(t, onnxtest.GemmaOptions{Layers: 1, ExternalData: "model.onnx_data"})
	os.Remove(filepath.Join(missingExt, "model.onnx_data"))
	badJSON := t.TempDir()
	os.WriteFile(filepath.Join(badJSON, "genai_config.json"), []byte(`{"model": `), 0o644)

	for _, c := range []struct {
		name string
		dir  string
		want []string
	}{
		{"missing dir", filepath.Join(noONNX, "nope"), []string{"nope"}},
		{"no onnx file", noONNX, []string{"no .onnx model in", noONNX}},
		{"two onnx files", twoONNX, []string{"2 .onnx files", "a.onnx, b.onnx"}},
		{"no input_ids", gemmaDir(t, onnxtest.GemmaOptions{Layers: 1, InputIDs: "tokens"}), []string{`"tokens"`, "input_ids"}},
		{"missing external data", missingExt, []string{"model.onnx_data"}},
		{"kv head dim mismatch", kvMismatchModel(t), []string{"head dim disagrees", "past_key_values.0.key", "present.0.key"}},
		{"bad genai_config.json", badJSON, []string{"genai_config.json"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			m, err := Open(c.dir, Options{Threads: 1})
			if err == nil {
				m.Close()
				t.Fatal("no error")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

func TestLibraryErrors(t *testing.T) {
	dir := t.TempDir()
	notLib := filepath.Join(dir, "libonnxruntime.so.1")
	os.WriteFile(notLib, []byte("not a shared library"), 0o644)
	for _, lib := range []string{filepath.Join(dir, "missing", "libonnxruntime.so.1"), notLib, dir} {
		_, _, err := initRuntime(lib)
		if err == nil || !errors.Is(err, ErrLibrary) || !strings.Contains(err.Error(), lib) {
			t.Errorf("lib %s: %v, want an ErrLibrary naming it", lib, err)
		}
		if err != nil && !strings.Contains(err.Error(), "make onnxruntime") && !strings.Contains(err.Error(), "already loaded") {
			t.Errorf("lib %s: %v does not say how to install the library", lib, err)
		}
	}
	// Open reports the same error rather than panicking.
	_, err := Open(gemmaDir(t, onnxtest.GemmaOptions{Layers: 1}), Options{Lib: filepath.Join(dir, "missing.so")})
	if err == nil || !strings.Contains(err.Error(), "make onnxruntime") || !strings.Contains(err.Error(), LibEnv) {
		t.Errorf("Open with a missing library: %v", err)
	}
}

func TestFindLibrary(t *testing.T) {
	root := t.TempDir()
	lib := filepath.Join(root, libRel)
	os.MkdirAll(filepath.Dir(lib), 0o755)
	os.WriteFile(lib, nil, 0o644)
	deep := filepath.Join(root, "a", "b")
	os.MkdirAll(deep, 0o755)
	other := filepath.Join(root, "other.so")
	os.WriteFile(other, nil, 0o644)

	t.Chdir(deep)
	t.Setenv(LibEnv, "")
	if got, err := findLibrary(""); err != nil || got != lib {
		t.Errorf("walk up: %q, %v; want %q", got, err, lib)
	}
	t.Setenv(LibEnv, other)
	if got, err := findLibrary(""); err != nil || got != other {
		t.Errorf("env: %q, %v; want %q", got, err, other)
	}
	if got, err := findLibrary(lib); err != nil || got != lib {
		t.Errorf("option beats env: %q, %v; want %q", got, err, lib)
	}
	t.Setenv(LibEnv, filepath.Join(root, "gone.so"))
	if _, err := findLibrary(""); err == nil || !strings.Contains(err.Error(), LibEnv) || !strings.Contains(err.Error(), "gone.so") {
		t.Errorf("env to a missing file: %v", err)
	}
}

// The 18-layer Gemma-signature model takes a moment to generate (more under
// -race), so the tests and benchmarks that need the full layer count share
// one copy.
var gemma18 struct {
	once sync.Once
	dir  string
	err  error
}

func sharedGemma(t testing.TB) string {
	t.Helper()
	gemma18.once.Do(func() {
		gemma18.dir, gemma18.err = os.MkdirTemp("", "glint-onnx-gemma-")
		if gemma18.err == nil {
			gemma18.err = onnxtest.WriteGemmaLike(gemma18.dir, onnxtest.GemmaOptions{Seed: 1})
		}
	})
	if gemma18.err != nil {
		t.Fatal(gemma18.err)
	}
	return gemma18.dir
}

func TestMain(m *testing.M) {
	code := m.Run()
	if gemma18.dir != "" {
		os.RemoveAll(gemma18.dir)
	}
	os.Exit(code)
}

// The engine runs over the ONNX runner's one sequence: a session's greedy
// ids are the runner's own, a second session is refused, Truncate drops a
// suffix (regenerating gives the same ids), and a full context ends the
// generation (the graph applies RoPE itself, so there is no shift).
func TestEngineSession(t *testing.T) {
	m := open(t, gemmaDir(t, onnxtest.GemmaOptions{Seed: 6, Layers: 2, MaxPos: 16}))
	prompt := []int32{onnxtest.BOSID, 270, 280, 300}
	want := greedy(t, m, prompt, 6)
	m.Reset()
	e := engine.New(m)
	defer e.Close()
	s, err := e.NewSession(engine.SessionOptions{ContextShift: true, Keep: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	tm, err := s.Generate(t.Context(), prompt, engine.Options{MaxTokens: 6})
	if err != nil || !slices.Equal(tm.Generated, want) {
		t.Fatalf("session %v (%v), runner %v", tm.Generated, err, want)
	}
	if _, err := e.NewSession(engine.SessionOptions{}); err == nil {
		t.Fatal("a second session on one sequence")
	}
	if err := s.Truncate(len(prompt) + 2); err != nil {
		t.Fatal(err)
	}
	again, err := s.Generate(t.Context(), nil, engine.Options{MaxTokens: 4})
	if err != nil || !slices.Equal(again.Generated, want[2:6]) {
		t.Fatalf("after Truncate %v (%v), want %v", again.Generated, err, want[2:6])
	}
	full, err := s.Generate(t.Context(), nil, engine.Options{MaxTokens: 20})
	if err != nil || !full.ContextFull {
		t.Fatalf("past the context of 16: %d tokens, ContextFull %v, %v", len(full.Generated), full.ContextFull, err)
	}
}
