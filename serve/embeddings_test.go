package serve

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/openai/openai-go/v3"

	"github.com/glint-llm/glint"
	"github.com/glint-llm/glint/engine"
	"github.com/glint-llm/glint/internal/peer"
	"github.com/glint-llm/glint/internal/shared"
	"github.com/glint-llm/glint/model/gguf"
	"github.com/glint-llm/glint/model/synth"
)

var embedTexts = []string{"Once upon a time", "The little dog ran to the park and played with a ball.", "Lily"}

// oaiEmbeddings is /v1/embeddings' reply as the test reads it.
type oaiEmbeddings struct {
	Object string `json:"object"`
	Model  string `json:"model"`
	Data   []struct {
		Object    string          `json:"object"`
		Index     int             `json:"index"`
		Embedding json.RawMessage `json:"embedding"`
	} `json:"data"`
	Usage struct {
		PromptTokens int `json:"prompt_tokens"`
		TotalTokens  int `json:"total_tokens"`
	} `json:"usage"`
}

// embedPost posts body to /v1/embeddings and returns the float vectors.
func embedPost(t *testing.T, ts *testServer, body string) ([][]float32, oaiEmbeddings) {
	t.Helper()
	code, b := ts.post(t, "/v1/embeddings", body)
	if code != 200 {
		t.Fatalf("status %d: %s", code, b)
	}
	var r oaiEmbeddings
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	if r.Object != "list" || r.Model != ts.m.Name || r.Usage.TotalTokens != r.Usage.PromptTokens || r.Usage.PromptTokens <= 0 {
		t.Fatalf("reply %.300s: want object list, model %q, usage counts", b, ts.m.Name)
	}
	out := make([][]float32, len(r.Data))
	for i, d := range r.Data {
		if d.Object != "embedding" || d.Index != i {
			t.Fatalf("data[%d]: object %q index %d", i, d.Object, d.Index)
		}
		if err := json.Unmarshal(d.Embedding, &out[i]); err != nil {
			t.Fatalf("data[%d]: %v", i, err)
		}
	}
	return out, r
}

func cosine(a, b []float32) float64 {
	var ab, aa, bb float64
	for i := range a {
		ab += float64(a[i]) * float64(b[i])
		aa += float64(a[i]) * float64(a[i])
		bb += float64(b[i]) * float64(b[i])
	}
	return ab / math.Sqrt(aa*bb)
}

// llamaEmbeddings runs llama-embedding on texts (mean pooling, L2
// normalised) and returns its vectors.
func llamaEmbeddings(t *testing.T, dir, path string, texts []string) [][]float32 {
	t.Helper()
	cmd := exec.Command(filepath.Join(dir, "llama-embedding"), "-m", path, "--pooling", "mean", "--embd-normalize", "2",
		"--embd-output-format", "json", "-c", "512", "-b", "512", "-ub", "512", "-t", "1", "-p", strings.Join(texts, "\n"))
	cmd.Env = append(os.Environ(), "LD_LIBRARY_PATH="+dir)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		s := stderr.String()
		t.Fatalf("llama-embedding: %v: %s", err, s[max(0, len(s)-500):])
	}
	var r struct {
		Data []struct {
			Embedding []float32 `json:"embedding"`
		} `json:"data"`
	}
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("llama-embedding's JSON: %v", err)
	}
	vs := make([][]float32, len(r.Data))
	for i, d := range r.Data {
		vs[i] = d.Embedding
	}
	return vs
}

// /v1/embeddings with mean pooling gives llama.cpp's vectors
// (llama-embedding --pooling mean --embd-normalize 2): cosine ≥ 0.999.
// Both round activations of F16 weights to f16 and keep an f16 KV cache,
// summing in other orders; llama-embedding prints 7 decimals.
func TestEmbedVsLlamaCpp(t *testing.T) {
	dir, err := peer.Find()
	if err != nil {
		t.Skip(err)
	}
	for _, rel := range []string{"stories260K/stories260K.gguf", "llama3-tiny/llama3-tiny-F16.gguf"} {
		t.Run(filepath.Base(rel), func(t *testing.T) {
			path := shared.Models(t, rel)
			ts := start(t, load(t, path, LoadOptions{Pooling: "mean"}), Options{})
			body, _ := json.Marshal(map[string]any{"input": embedTexts})
			got, _ := embedPost(t, ts, string(body))
			want := llamaEmbeddings(t, dir, path, embedTexts)
			if len(got) != len(want) {
				t.Fatalf("%d vectors, llama.cpp %d", len(got), len(want))
			}
			var worst float64
			for i := range want {
				if len(got[i]) != len(want[i]) {
					t.Fatalf("input %d: %d dimensions, llama.cpp %d", i, len(got[i]), len(want[i]))
				}
				for k := range want[i] {
					worst = math.Max(worst, math.Abs(float64(got[i][k]-want[i][k])))
				}
				if c := cosine(got[i], want[i]); c < 0.999 {
					t.Errorf("input %d: cosine %.6f with llama.cpp's", i, c)
				} else {
					t.Logf("input %d: cosine %.7f", i, c)
				}
			}
			t.Logf("max |Δ| %.3g against llama.cpp", worst)
		})
	}
}

// The official client: a string and an array, float and base64, give
// unit vectors of the model's width; base64 carries the float's bits; the
// string's vector is the array's first (the same prompt); and each is
// engine.Session.Embed's mean on a separately loaded model, normalised.
// Meanwhile a completion on the other slot gives the text it gives alone.
func TestEmbedOpenAIClient(t *testing.T) {
	path := stories(t)
	m := load(t, path, LoadOptions{Parallel: 2})
	ts := start(t, m, Options{})
	ctx := t.Context()
	var wg sync.WaitGroup
	var text string
	var cerr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		c, err := ts.client.Completions.New(ctx, completionParams("Once upon a time", 24), greedy...)
		if err == nil && len(c.Choices) == 1 {
			text = c.Choices[0].Text
		}
		cerr = err
	}()
	get := func(in openai.EmbeddingNewParamsInputUnion, format openai.EmbeddingNewParamsEncodingFormat) [][]float64 {
		t.Helper()
		r, err := ts.client.Embeddings.New(ctx, openai.EmbeddingNewParams{Input: in, Model: "x", EncodingFormat: format})
		if err != nil {
			t.Fatal(err)
		}
		if r.Usage.PromptTokens <= 0 || r.Usage.TotalTokens != r.Usage.PromptTokens {
			t.Errorf("usage %+v", r.Usage)
		}
		out := make([][]float64, len(r.Data))
		for i, d := range r.Data {
			if d.Index != int64(i) || len(d.Embedding) != m.Embd {
				t.Fatalf("data[%d]: index %d, %d dimensions (want %d)", i, d.Index, len(d.Embedding), m.Embd)
			}
			var n float64
			for _, x := range d.Embedding {
				n += x * x
			}
			if math.Abs(math.Sqrt(n)-1) > 1e-6 {
				t.Errorf("data[%d]: length %g, want 1", i, math.Sqrt(n))
			}
			out[i] = d.Embedding
		}
		return out
	}
	one := openai.EmbeddingNewParamsInputUnion{OfString: openai.String(embedTexts[0])}
	all := openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: embedTexts}
	f1, b1 := get(one, openai.EmbeddingNewParamsEncodingFormatFloat), get(one, openai.EmbeddingNewParamsEncodingFormatBase64)
	fa, ba := get(all, openai.EmbeddingNewParamsEncodingFormatFloat), get(all, openai.EmbeddingNewParamsEncodingFormatBase64)
	if len(f1) != 1 || len(b1) != 1 || len(fa) != len(embedTexts) || len(ba) != len(embedTexts) {
		t.Fatalf("%d, %d, %d, %d vectors", len(f1), len(b1), len(fa), len(ba))
	}
	same := func(what string, a, b []float64) {
		t.Helper()
		for k := range a {
			// JSON's shortest float32 text, read as float64, names the
			// same float32.
			if float32(a[k]) != float32(b[k]) {
				t.Fatalf("%s: element %d: %g and %g", what, k, a[k], b[k])
			}
		}
	}
	same("string: float and base64", f1[0], b1[0])
	same("the string and the array's first", f1[0], fa[0])
	for i := range fa {
		same(fmt.Sprintf("array[%d]: float and base64", i), fa[i], ba[i])
	}

	ref, err := glint.Open(path, glintOpts)
	if err != nil {
		t.Fatal(err)
	}
	defer ref.Close()
	s, err := ref.NewSession(engine.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i, txt := range embedTexts {
		v, err := s.Embed(ctx, ref.Tokenizer.Encode(txt, true), engine.PoolingMean)
		if err != nil {
			t.Fatal(err)
		}
		engine.Normalize(v[0])
		for k, x := range v[0] {
			if d := math.Abs(float64(x) - fa[i][k]); d > 1e-6 {
				t.Fatalf("input %d element %d: %g, Session.Embed %g", i, k, fa[i][k], x)
			}
		}
	}
	wg.Wait()
	if cerr != nil {
		t.Fatal(cerr)
	}
	if want := reference(t, path, ref.Tokenizer.Encode("Once upon a time", true), 24); text != want {
		t.Errorf("completion beside the embeddings: %q, alone %q", text, want)
	}
}

// Token-id inputs are the prompt as given (no BOS added), one array or
// several; /embeddings (llama-server's shape) with pooling none gives one
// unnormalised vector per token, and /v1/embeddings refuses that pooling
// as llama-server does; the CLS pooling is the first token's vector, the
// last pooling the last's, each normalised.
func TestEmbedTokensAndPoolings(t *testing.T) {
	path := stories(t)
	ids := []int32{1, 36, 262, 401, 292}
	perToken := func() [][]float32 {
		ts := start(t, load(t, path, LoadOptions{Pooling: "none"}), Options{})
		code, b := ts.post(t, "/v1/embeddings", `{"input": "hello"}`)
		checkError(t, "pooling none on /v1/embeddings", code, b, 400, "not OpenAI-compatible")
		code, b = ts.post(t, "/embeddings", `{"content": [[1, 36, 262, 401, 292], "Lily"]}`)
		if code != 200 {
			t.Fatalf("/embeddings: %d %s", code, b)
		}
		var r []struct {
			Index     int         `json:"index"`
			Embedding [][]float32 `json:"embedding"`
		}
		if err := json.Unmarshal(b, &r); err != nil {
			t.Fatal(err)
		}
		lily := len(ts.m.Tokenizer.Encode("Lily", true))
		if len(r) != 2 || len(r[0].Embedding) != len(ids) || len(r[1].Embedding) != lily || r[1].Index != 1 {
			t.Fatalf("/embeddings: %d items, want 2 of %d and %d vectors", len(r), len(ids), lily)
		}
		return r[0].Embedding
	}()
	normal := func(v []float32) []float32 {
		v = append([]float32(nil), v...)
		engine.Normalize(v)
		return v
	}
	for _, tc := range []struct {
		pooling string
		want    []float32
	}{
		{"cls", normal(perToken[0])},
		{"last", normal(perToken[len(perToken)-1])},
	} {
		ts := start(t, load(t, path, LoadOptions{Pooling: tc.pooling}), Options{})
		got, r := embedPost(t, ts, `{"input": [[1, 36, 262, 401, 292], [1, 36, 262, 401, 292]]}`)
		if len(got) != 2 || r.Usage.PromptTokens != 2*len(ids) {
			t.Fatalf("%s: %d vectors, %d tokens", tc.pooling, len(got), r.Usage.PromptTokens)
		}
		for k := range tc.want {
			if d := math.Abs(float64(got[0][k] - tc.want[k])); d > 1e-6 || got[0][k] != got[1][k] {
				t.Fatalf("%s: element %d: %g (and %g), want %g", tc.pooling, k, got[0][k], got[1][k], tc.want[k])
			}
		}
	}
}

// Bad embeddings requests get 400 naming what is wrong; a server started
// with DisableEmbeddings answers 501.
func TestEmbedBadInput(t *testing.T) {
	ts := start(t, tinyModel(t), Options{})
	long := strings.Repeat(" hello", testCtx)
	for _, tc := range []struct{ body, msg string }{
		{`{}`, `"input" or "content" must be provided`},
		{`{"input": null}`, `"input" or "content" must be provided`},
		{`{"input": []}`, `empty`},
		{`{"input": [[]]}`, `empty`},
		{`{"input": [{}]}`, `"input": element 0`},
		{`{"input": 5}`, `"input"`},
		{`{"input": "hi", "encoding_format": "hex"}`, `"encoding_format"`},
		{`{"input": "hi", "dimensions": 3}`, `"dimensions"`},
		{`{"input": "hi", "pooling": "cls"}`, `"pooling" is not a field of /v1/embeddings`},
		{`{"input": [1, 999999]}`, `outside the vocabulary`},
		{`{"input": [[1, 2], [-1]]}`, `outside the vocabulary`},
		{fmt.Sprintf(`{"input": %q}`, long), `does not fit the context`},
		{fmt.Sprintf(`{"input": [%s"x"]}`, strings.Repeat(`"x", `, maxEmbedInputs)), `over the limit`},
	} {
		code, b := ts.post(t, "/v1/embeddings", tc.body)
		checkError(t, tc.body[:min(len(tc.body), 60)], code, b, 400, tc.msg)
	}
	if _, r := embedPost(t, ts, `{"input": "still serving"}`); len(r.Data) != 1 {
		t.Fatalf("%d vectors", len(r.Data))
	}
	off := start(t, load(t, stories(t), LoadOptions{DisableEmbeddings: true}), Options{})
	code, b := off.post(t, "/v1/embeddings", `{"input": "hi"}`)
	checkError(t, "embeddings disabled", code, b, 501, "--embeddings=false")
}

// base64 is little-endian float32, as OpenAI's.
func TestEmbedBase64Floats(t *testing.T) {
	v := []float32{1, -0.5, float32(math.Pi), 1e-30}
	b, err := base64.StdEncoding.DecodeString(base64Floats(v))
	if err != nil || len(b) != 16 {
		t.Fatalf("%d bytes, %v", len(b), err)
	}
	for i, x := range v {
		if got := math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:])); got != x {
			t.Errorf("element %d: %g, want %g", i, got, x)
		}
	}
}

// withPooling copies the GGUF file src to a new file with
// {arch}.pooling_type set to p.
func withPooling(t *testing.T, src string, p engine.Pooling) string {
	t.Helper()
	f, err := gguf.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	arch, err := f.String("general.architecture")
	if err != nil {
		t.Fatal(err)
	}
	w := gguf.NewWriter()
	for _, kv := range f.KV {
		if kv.Key != "general.alignment" {
			if err := w.Add(kv.Key, kv.Value); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := w.Add(arch+".pooling_type", uint32(p)); err != nil {
		t.Fatal(err)
	}
	for _, ti := range f.Tensors {
		d, _, err := f.TensorData(ti.Name)
		if err != nil {
			t.Fatal(err)
		}
		if err := w.AddTensor(ti.Name, ti.Type, ti.Shape(), d); err != nil {
			t.Fatal(err)
		}
	}
	dst := filepath.Join(t.TempDir(), "pooled.gguf")
	if err := w.WriteFile(dst); err != nil {
		t.Fatal(err)
	}
	return dst
}

// Without --pooling, the file's {arch}.pooling_type is the pooling, else
// mean; --pooling overrides the file.
func TestEmbedPoolingDefault(t *testing.T) {
	p := filepath.Join(t.TempDir(), "tiny.gguf")
	if err := synth.WriteGGUF(p, synth.Options{Shape: "tiny", Type: "F32", Seed: 2, Std: 0.2}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		file engine.Pooling // PoolingUnspecified: no key
		flag string
		want engine.Pooling
	}{
		{engine.PoolingUnspecified, "", engine.PoolingMean},
		{engine.PoolingLast, "", engine.PoolingLast},
		{engine.PoolingCLS, "", engine.PoolingCLS},
		{engine.PoolingNone, "", engine.PoolingNone},
		{engine.PoolingLast, "mean", engine.PoolingMean},
		{engine.PoolingUnspecified, "cls", engine.PoolingCLS},
	} {
		path := p
		if tc.file != engine.PoolingUnspecified {
			path = withPooling(t, p, tc.file)
		}
		if m := load(t, path, LoadOptions{Pooling: tc.flag}); m.Pooling != tc.want {
			t.Errorf("file %v, --pooling %q: pooling %v, want %v", tc.file, tc.flag, m.Pooling, tc.want)
		}
	}
	if _, err := Load(p, LoadOptions{Options: glintOpts, Pooling: "max"}); err == nil {
		t.Error("--pooling max: no error")
	}
}
