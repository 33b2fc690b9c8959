package main

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/glint-llm/glint/internal/fidelity"
	"github.com/glint-llm/glint/internal/shared"
	"github.com/glint-llm/glint/model/gguf"
	"github.com/glint-llm/glint/model/synth"
)

// run executes this test binary as the generate command (see TestMain).
func run(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	return runEnv(t, nil, args...)
}

// runEnv is run with env added to the environment.
func runEnv(t *testing.T, env []string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, args...)
	cmd.Env = append(append(os.Environ(), mainEnv+"=1"), env...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err = cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		t.Fatal(err)
	}
	return o.String(), e.String(), code
}

func tinyModel(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "tiny.gguf")
	if err := synth.WriteGGUF(p, synth.Options{Shape: "tiny", Type: "Q8_0", Seed: 2, Std: 0.2}); err != nil {
		t.Fatal(err)
	}
	return p
}

// ggufBytes is a hand-built GGUF v3 header: kvs are (key, type, payload)
// and tensors (name, dims, type, offset).
func ggufBytes(kvs [][3]any, tensors [][4]any) []byte {
	var b bytes.Buffer
	w := func(v any) { binary.Write(&b, binary.LittleEndian, v) }
	str := func(s string) { w(uint64(len(s))); b.WriteString(s) }
	b.WriteString("GGUF")
	w(uint32(3))
	w(uint64(len(tensors)))
	w(uint64(len(kvs)))
	for _, kv := range kvs {
		str(kv[0].(string))
		w(uint32(kv[1].(gguf.ValueType)))
		b.Write(kv[2].([]byte))
	}
	for _, ti := range tensors {
		str(ti[0].(string))
		dims := ti[1].([]uint64)
		w(uint32(len(dims)))
		for _, d := range dims {
			w(d)
		}
		w(ti[2].(uint32))
		w(ti[3].(uint64))
	}
	for b.Len()%32 != 0 {
		b.WriteByte(0)
	}
	return b.Bytes()
}

func strPayload(s string) []byte {
	var b bytes.Buffer
	binary.Write(&b, binary.LittleEndian, uint64(len(s)))
	b.WriteString(s)
	return b.Bytes()
}

// withKeys rewrites a GGUF file through gguf.Writer with some metadata
// values replaced.
func withKeys(t *testing.T, path string, set map[string]any) []byte {
	t.Helper()
	src, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	w := gguf.NewWriter()
	for _, kv := range src.KV {
		v := any(kv.Value)
		if s, ok := set[kv.Key]; ok {
			v = s
		}
		if err := w.Add(kv.Key, v); err != nil {
			t.Fatal(err)
		}
	}
	for _, ti := range src.Tensors {
		td, err := src.Tensor(ti.Name)
		if err != nil {
			t.Fatal(err)
		}
		if err := w.AddTensor(ti.Name, ti.Type, ti.Shape(), td.Data); err != nil {
			t.Fatal(err)
		}
	}
	var b bytes.Buffer
	if _, err := w.WriteTo(&b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// Bad input ends in one line on stderr naming the problem, exit status 1,
// and never a panic.
func TestBadInput(t *testing.T) {
	dir := t.TempDir()
	tiny := tinyModel(t)
	good, err := os.ReadFile(tiny)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	arch := [3]any{"general.architecture", gguf.TypeString, strPayload("llama")}
	hugeArray := append(binary.LittleEndian.AppendUint32(nil, uint32(gguf.TypeString)), binary.LittleEndian.AppendUint64(nil, 1<<60)...)
	cases := []struct {
		name string
		args []string
		want string // in the error line
	}{
		{"truncated", []string{"-m", write("truncated.gguf", good[:len(good)/3]), "-p", "x"}, "truncated.gguf"},
		{"tensor data past end", []string{"-m", write("short.gguf", good[:len(good)-100]), "-p", "x"}, "past end"},
		{"wrong magic", []string{"-m", write("magic.gguf", append([]byte("GGML"), good[4:]...)), "-p", "x"}, "magic"},
		{"huge array", []string{"-m", write("huge.gguf", ggufBytes([][3]any{arch, {"tokenizer.ggml.tokens", gguf.TypeArray, hugeArray}}, nil)), "-p", "x"}, "huge.gguf"},
		{"1e7 layers", []string{"-m", write("layers.gguf", withKeys(t, tiny, map[string]any{"llama.block_count": uint32(1e7)})), "-p", "x"}, "layers.gguf: llama.block_count 10000000 exceeds what the file's"},
		{"1e6 layers", []string{"-m", write("layers6.gguf", withKeys(t, tiny, map[string]any{"llama.block_count": uint32(1e6)})), "-p", "x"}, "llama.block_count 1000000 exceeds"},
		{"1e7 tensors", []string{"-m", write("tensors.gguf", append(binary.LittleEndian.AppendUint64(append([]byte("GGUF\x03\x00\x00\x00"), binary.LittleEndian.AppendUint64(nil, 1e7)...), 0), make([]byte, 1234)...)), "-p", "x"}, "tensors.gguf: header: tensor count 10000000 exceeds what the 1234 bytes left can hold"},
		{"1e9 context", []string{"-m", write("ctx.gguf", withKeys(t, tiny, map[string]any{"llama.context_length": uint32(1e9)})), "-c", "0", "-p", "x"}, "context 1000000000 is more than glint supports"},
		{"unsupported tensor type", []string{"-m", write("q5.gguf", ggufBytes([][3]any{arch}, [][4]any{{"token_embd.weight", []uint64{32, 4}, uint32(16), uint64(0)}})), "-p", "x"}, "token_embd.weight"},
		{"unknown architecture", []string{"-m", write("mamba.gguf", ggufBytes([][3]any{{"general.architecture", gguf.TypeString, strPayload("mamba")}}, nil)), "-p", "x"}, "mamba"},
		{"missing file", []string{"-m", filepath.Join(dir, "nope.gguf"), "-p", "x"}, "nope.gguf"},
		{"prompt beyond context", []string{"-m", write("ok.gguf", good), "-c", "8", "-p", strings.Repeat("hello world ", 20)}, "ok.gguf: prompt of"},
		{"no such OpenCL device", []string{"-m", write("ok2.gguf", good), "-b", "opencl", "--device", "no-such-device", "-p", "x"}, "no-such-device"},
		{"missing ONNX library", []string{"-b", "onnx", "-m", shared.Models(t, "onnx-genai-test/tiny-random-gpt2-fp32"), "--ort-lib", filepath.Join(dir, "libnope.so"), "-p", "x"}, "make onnxruntime"},
		{"unknown OpenCL tuning", []string{"-m", write("ok5.gguf", good), "-b", "opencl", "--tune", "gemm=100", "-p", "x"}, "gemm=100"},
		{"unknown backend", []string{"-m", write("ok3.gguf", good), "-b", "cuda", "-p", "x"}, "cuda"},
		{"unknown cache type", []string{"-m", write("ok4.gguf", good), "-ctv", "q6_k", "-p", "x"}, `cache type "q6_k" is not supported`},
		{"block cache type on heads of 16", []string{"-m", write("ok4.gguf", good), "-ctv", "q8_0", "-p", "x"}, "a head size of 16 is not a multiple of it"},
		{"quantised V without flash attention", []string{"-m", write("ok4.gguf", good), "-ctv", "q8_0", "-fa", "off", "-p", "x"}, "requires flash attention"},
		{"unknown flash attention mode", []string{"-m", write("ok4.gguf", good), "-fa", "maybe", "-p", "x"}, `flash attention "maybe"`},
		{"report with an unknown speculative type", []string{"report", "-m", write("ok4.gguf", good), "-b", "cpu", "--spec-type", "bogus"}, `--spec-type "bogus"`},
		{"report with a missing draft model", []string{"report", "-m", write("ok4.gguf", good), "-b", "cpu", "-md", "/nonexistent/draft.gguf"}, "draft model"},
		{"generate with a missing draft model", []string{"-m", write("ok4.gguf", good), "-md", "/nonexistent/draft.gguf", "-p", "x"}, "draft model"},
		{"bad prompt ids", []string{"-m", write("ok4.gguf", good), "--prompt-ids", "1,x"}, "x"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if slices.Contains(tc.args, "opencl") {
				needOpenCL(t)
			}
			stdout, stderr, code := run(t, tc.args...)
			// One error line; load information may precede it and a device
			// listing follow it.
			var first string
			for _, l := range strings.Split(stderr, "\n") {
				if strings.HasPrefix(l, "generate: ") {
					first = l
					break
				}
			}
			if code != 1 || !strings.HasPrefix(first, "generate: ") || !strings.Contains(first, tc.want) {
				t.Fatalf("exit %d, stderr %q: want exit 1 and a line naming %q", code, stderr, tc.want)
			}
			if strings.Contains(stderr, "panic") || strings.Contains(stderr, "goroutine") || stdout != "" {
				t.Fatalf("stdout %q, stderr %q", stdout, stderr)
			}
		})
	}
}

// stdout carries exactly llama.cpp's text (the records whose ids match to
// the last token), and the timings go to stderr.
func TestGenerateText(t *testing.T) {
	for _, rec := range fidelity.LlamaCpp(t) {
		if !strings.HasPrefix(rec.Model, "stories260K") || strings.Contains(rec.Model, "Q4_0") {
			continue // Q4_0 leaves llama.cpp's path at a near-tie (fidelity.NearTie)
		}
		var want struct{ text string }
		want.text = recordText(t, rec.Model)
		for _, b := range []string{"cpu", "opencl"} {
			if b == "opencl" && !haveOpenCL() {
				continue // no device: the CPU half still runs
			}
			stdout, stderr, code := run(t, "-m", rec.Path(t), "-b", b, "--temp", "0", "-n", "48", "-p", rec.Prompt)
			if code != 0 {
				t.Fatalf("%s %s: exit %d: %s", rec.Model, b, code, stderr)
			}
			if stdout != want.text {
				t.Errorf("%s %s: stdout %q, want %q", rec.Model, b, stdout, want.text)
			}
			if !strings.Contains(stderr, "TTFT: ") || !strings.Contains(stderr, "Avg TBT: ") {
				t.Errorf("%s %s: no timings on stderr: %q", rec.Model, b, stderr)
			}
		}
	}
}

func recordText(t *testing.T, model string) string {
	t.Helper()
	var f struct {
		Records []struct {
			Model string `json:"model"`
			Text  string `json:"generated_text"`
		} `json:"records"`
	}
	readJSON(t, shared.Models(t, "llamacpp_greedy_public.json"), &f)
	for _, r := range f.Records {
		if r.Model == model {
			return r.Text
		}
	}
	t.Fatalf("no record for %s", model)
	return ""
}

// The ONNX path through the CLI: ORT-GenAI's own expected greedy ids.
func TestGenerateONNX(t *testing.T) {
	dir := shared.Models(t, "onnx-genai-test/tiny-random-gpt2-fp32")
	stdout, stderr, code := run(t, "-b", "onnx", "-m", dir, "--prompt-ids", "0,0,0,52", "-n", "6", "--temp", "0", "--output", "ids")
	if code != 0 && strings.Contains(stderr, "make onnxruntime") {
		t.Skip("ONNX Runtime library not installed (make onnxruntime)")
	}
	if code != 0 || strings.TrimSpace(stdout) != "204 204 204 204 204 204" {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
}

// tokenize works on vocab-only GGUF files and matches llama.cpp's ids.
func TestTokenize(t *testing.T) {
	vocab := shared.Models(t, "llama.cpp-vocab/ggml-vocab-llama3-bpe.gguf")
	stdout, stderr, code := run(t, "tokenize", "-m", vocab, "-p", "This is a test sentence.")
	if code != 0 || strings.TrimSpace(stdout) != "128000 2028 374 264 1296 11914 13" {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
}

// The same seed gives the same text; --seed changes it.
func TestSeed(t *testing.T) {
	m := tinyModel(t)
	gen := func(seed string) string {
		out, stderr, code := run(t, "-m", m, "--seed", seed, "--temp", "1.5", "--top-k", "0", "-n", "12", "-p", "hi", "--output", "ids")
		if code != 0 {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		return out
	}
	a, b, c := gen("11"), gen("11"), gen("12")
	if a != b {
		t.Fatalf("seed 11 twice: %q vs %q", a, b)
	}
	if a == c {
		t.Fatalf("seeds 11 and 12 both gave %q", a)
	}
}

// parity passes on real F32 weights within 1e-3 (issue: CPU vs OpenCL).
func TestParityCommand(t *testing.T) {
	needOpenCL(t)
	m := shared.Models(t, "stories260K/stories260K.gguf")
	stdout, stderr, code := run(t, "parity", "-m", m, "-p", "Once upon a time", "-n", "24", "--backends", "cpu,opencl", "--tol", "1e-3")
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	if !strings.Contains(stdout, "0 failing steps") {
		t.Fatalf("parity output:\n%s", stdout)
	}
}

// parity on a K-quant mix (Q4_K, Q5_K and Q6_K tensors in one file): the
// backends' greedy ids agree at every step, each step within --tol-quant.
func TestParityCommandKQuants(t *testing.T) {
	needOpenCL(t)
	m := shared.Models(t, "kquants/kq-small-Q4_K_M.gguf")
	stdout, stderr, code := run(t, "parity", "-m", m, "-p", "Once upon a time", "-n", "24", "--backends", "cpu,opencl")
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	if !strings.Contains(stdout, "0 failing steps") {
		t.Fatalf("parity output:\n%s", stdout)
	}
}

func readJSON(t *testing.T, path string, v any) {

	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// --dump-logits writes one little-endian float32 row per generated step:
// from BOS, stories260K's rows are the float64 reference's positions 0-2
// (which keeps K and V exact: an f32 cache).
func TestDumpLogits(t *testing.T) {
	ref := fidelity.StoriesRef(t)
	dump := filepath.Join(t.TempDir(), "logits.bin")
	_, stderr, code := run(t, "-m", ref.Path, "--prompt-ids", "1", "-n", "3", "--temp", "0", "--output", "ids", "--dump-logits", dump, "-ctk", "f32", "-ctv", "f32")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	b, err := os.ReadFile(dump)
	if err != nil {
		t.Fatal(err)
	}
	vocab := len(ref.Logits[0])
	if len(b) != 3*4*vocab {
		t.Fatalf("%d bytes, want 3 rows of %d floats", len(b), vocab)
	}
	for row := 0; row < 3; row++ {
		for i, want := range ref.Logits[row] {
			got := math.Float32frombits(binary.LittleEndian.Uint32(b[4*(row*vocab+i):]))
			if math.Abs(float64(got-want)) > 1e-4 {
				t.Fatalf("row %d logit %d: %g, want %g", row, i, got, want)
			}
		}
	}
}

// The KV cache is f16 unless -ctk/-ctv say otherwise, as in llama.cpp: the
// default run's logits are the explicit f16 run's, bit for bit, and differ
// from an f32 cache's (K and V rounded to f16 move them by ~1e-4).
func TestCacheTypeDefault(t *testing.T) {
	ref := fidelity.StoriesRef(t)
	dump := func(extra ...string) []byte {
		p := filepath.Join(t.TempDir(), "logits.bin")
		args := append([]string{"-m", ref.Path, "--prompt-ids", "1,403,407", "-n", "4", "--temp", "0", "--output", "ids", "--dump-logits", p}, extra...)
		if _, stderr, code := run(t, args...); code != 0 {
			t.Fatalf("%v: exit %d: %s", extra, code, stderr)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	def, f16, f32 := dump(), dump("-ctk", "f16", "-ctv", "f16"), dump("--cache-type-k", "f32", "--cache-type-v", "f32")
	if !bytes.Equal(def, f16) {
		t.Error("the default cache gives other logits than -ctk f16 -ctv f16")
	}
	if bytes.Equal(def, f32) {
		t.Error("an f32 cache gives the f16 cache's logits bit for bit: the cache type is not applied")
	}
}
