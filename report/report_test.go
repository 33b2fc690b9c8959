package report_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/glint-llm/glint/backend"
	"github.com/glint-llm/glint/backend/opencl"
	"github.com/glint-llm/glint/internal/shared"
	"github.com/glint-llm/glint/model/gguf"
	"github.com/glint-llm/glint/model/synth"
	"github.com/glint-llm/glint/report"
)

// workerEnv makes the test binary act as the report's worker process, the
// way `generate report --worker` does, so Exec is tested for real.
const workerEnv = "GLINT_REPORT_TEST_WORKER"

func TestMain(m *testing.M) {
	switch os.Getenv(workerEnv) {
	case "":
	case "crash":
		fmt.Fprintln(os.Stderr, "worker: simulated crash")
		os.Exit(2)
	default:
		if err := report.Worker(os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func tinyGGUF(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "tiny-F32.gguf")
	if err := synth.WriteGGUF(p, synth.Options{Shape: "tiny", Type: "F32", Seed: 2, Std: 0.2}); err != nil {
		t.Fatal(err)
	}
	return p
}

func haveOpenCL() bool {
	ds, err := opencl.Devices()
	return err == nil && len(ds) > 0
}

func sha256File(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// decodeStrict decodes report.json into the schema struct, refusing fields
// the struct does not document.
func decodeStrict(t *testing.T, p string) report.Report {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var r report.Report
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		t.Fatalf("%s does not decode into report.Report: %v", p, err)
	}
	// Required fields must be present in the JSON itself, not just zero.
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"schema_version", "created", "machine", "settings", "backends"} {
		if _, ok := raw[k]; !ok {
			t.Errorf("report.json lacks %q", k)
		}
	}
	return r
}

// svgSeries parses the whole SVG as XML and returns the data-backend of
// every <polyline> or <path> that has one.
func svgSeries(t *testing.T, p string) []string {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dec := xml.NewDecoder(f)
	var series []string
	root := ""
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("%s is not well-formed XML: %v", p, err)
		}
		se, ok := tok.(xml.StartElement)
		if !ok {
			continue
		}
		if root == "" {
			root = se.Name.Local
		}
		if se.Name.Local != "polyline" && se.Name.Local != "path" {
			continue
		}
		for _, a := range se.Attr {
			if a.Name.Local == "data-backend" {
				series = append(series, a.Value)
			}
		}
	}
	if root != "svg" {
		t.Errorf("root element %q, want svg", root)
	}
	return series
}

// The report on the tiny model, each backend in a worker process: CPU runs,
// OpenCL runs where there is a device (else is skipped with a reason), and
// ONNX with a library path that does not exist is skipped with its reason.
func TestReportEndToEnd(t *testing.T) {
	model := tinyGGUF(t)
	onnxDir := shared.Models(t, "onnx-genai-test/tiny-random-gpt2-fp32")
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	const n, runs = 5, 2
	o := report.Options{
		Backends:  []string{"cpu", "opencl", "onnx"},
		Models:    map[string]string{"": model, "onnx": onnxDir},
		PromptIDs: []int32{1, 7, 42, 3},
		N:         n, Runs: runs, Threads: 1, Context: 64,
		OrtLib:  filepath.Join(t.TempDir(), "no-such-libonnxruntime.so"),
		Profile: true,
	}
	r, err := report.Run(context.Background(), o, report.Exec([]string{exe}, workerEnv+"=1"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := report.WriteFiles(dir, r); err != nil {
		t.Fatal(err)
	}
	got := decodeStrict(t, filepath.Join(dir, report.JSONName))

	if got.SchemaVersion != 1 {
		t.Errorf("schema_version %d, want 1", got.SchemaVersion)
	}
	mc := got.Machine
	if mc.OS == "" || mc.Arch == "" || mc.Cores < 1 || mc.GoVersion == "" {
		t.Errorf("machine incomplete: %+v", mc)
	}
	if got.Settings.NPredict != n || got.Settings.Runs != runs || !got.Settings.IgnoreEOS || got.Settings.Sampling != "greedy" {
		t.Errorf("settings %+v", got.Settings)
	}
	if len(got.Backends) != 3 {
		t.Fatalf("%d backends in the report, want 3 (none dropped)", len(got.Backends))
	}
	wantOK := map[string]bool{"cpu": true, "opencl": haveOpenCL(), "onnx": false}
	var okNames []string
	for _, b := range got.Backends {
		t.Run(b.Backend, func(t *testing.T) {
			if !wantOK[b.Backend] {
				if b.Status != report.StatusSkipped || b.Reason == "" {
					t.Fatalf("status %q reason %q, want skipped with a reason", b.Status, b.Reason)
				}
				if b.Backend == "onnx" && !strings.Contains(b.Reason, "ONNX Runtime library") {
					t.Errorf("onnx reason %q does not say the library is missing", b.Reason)
				}
				return
			}
			if b.Status != report.StatusOK {
				t.Fatalf("status %q: %s", b.Status, b.Reason)
			}
			okNames = append(okNames, b.Backend)
			if len(b.TTFTUs) != runs || len(b.GapsUs) != runs {
				t.Fatalf("%d TTFTs and %d gap lists, want %d of each", len(b.TTFTUs), len(b.GapsUs), runs)
			}
			total := 0
			for _, g := range b.GapsUs {
				total += len(g)
				for _, us := range g {
					if us <= 0 {
						t.Errorf("gap of %d µs", us)
					}
				}
			}
			if total != runs*(n-1) {
				t.Errorf("%d gaps, want runs×(N-1) = %d", total, runs*(n-1))
			}
			if b.PromptTokens != len(o.PromptIDs) || len(b.Generated) != n {
				t.Errorf("prompt %d tokens, generated %d; want %d and %d", b.PromptTokens, len(b.Generated), len(o.PromptIDs), n)
			}
			if b.Device == "" || b.LoadUs <= 0 || b.PeakRSSBytes <= 0 {
				t.Errorf("device %q, load %d µs, RSS %d: want all set", b.Device, b.LoadUs, b.PeakRSSBytes)
			}
			if b.Model.SHA256 != sha256File(t, model) || b.Model.Format != "gguf" || b.Model.TensorTypes["F32"] == 0 {
				t.Errorf("model info %+v", b.Model)
			}
			s := b.Summary
			if s == nil || s.TBTMsMin > s.TBTMsMedian || s.TBTMsMedian > s.TBTMsP90 || s.TBTMsP90 > s.TBTMsMax ||
				s.TTFTMsMin > s.TTFTMsMedian || s.TTFTMsMedian > s.TTFTMsMax || s.TokensPerSec <= 0 {
				t.Errorf("summary out of order: %+v", s)
			}
			if b.Backend == "opencl" {
				if b.LaunchesPerToken == nil || *b.LaunchesPerToken < 1 || len(b.LaunchesPerRun) != runs {
					t.Errorf("opencl launches %v per token, %v per run", b.LaunchesPerToken, b.LaunchesPerRun)
				}
				// A decode step multiplies by every matrix of the layers
				// and the output head, and reads norms, an embedding row
				// and KV cells besides: never less than the matrices.
				if w := decodeWeightBytes(t, model); b.DeviceBytesPerToken == nil || *b.DeviceBytesPerToken < float64(w) {
					t.Errorf("opencl moves %v bytes per token, want at least the %d bytes of the decode matrices", b.DeviceBytesPerToken, w)
				}
			} else if b.LaunchesPerToken != nil || b.DeviceBytesPerToken != nil {
				t.Errorf("%s reports launches or device bytes", b.Backend)
			}
			if b.Profile == nil || b.Profile.Tokens != runs*(n-1) {
				t.Fatalf("profile %+v, want one over %d tokens", b.Profile, runs*(n-1))
			}
			for _, k := range []string{backend.OpMatMul, backend.OpAttention, backend.OpNorm, backend.OpEmbedding} {
				if b.Profile.PerTokenUs[k] <= 0 || b.Profile.CallsPerToken[k] <= 0 {
					t.Errorf("profile %s: %v µs, %v calls per token", k, b.Profile.PerTokenUs[k], b.Profile.CallsPerToken[k])
				}
			}
			// One embedding gather per generated token: decode only.
			if c := b.Profile.CallsPerToken[backend.OpEmbedding]; c != 1 {
				t.Errorf("%v embedding calls per token, want 1 (prefill left out)", c)
			}
			// The prompt's table holds the ops a prefill runs.
			for _, k := range []string{backend.OpMatMul, backend.OpAttention, backend.OpEmbedding} {
				if b.Profile.PromptUs[k] <= 0 {
					t.Errorf("prompt profile %s: %v µs", k, b.Profile.PromptUs[k])
				}
			}
		})
	}

	series := svgSeries(t, filepath.Join(dir, report.SVGName))
	if strings.Join(series, ",") != strings.Join(okNames, ",") {
		t.Errorf("SVG series %v, want one per measured backend %v", series, okNames)
	}

	var table bytes.Buffer
	if err := report.WriteTable(&table, r); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(table.String()), "\n")
	if len(lines) != 2+len(o.Backends) {
		t.Fatalf("table has %d lines, want header, rule and %d rows:\n%s", len(lines), len(o.Backends), table.String())
	}
	for i, name := range o.Backends {
		if !strings.HasPrefix(lines[2+i], "| "+name+" |") {
			t.Errorf("row %d %q is not %s's", i, lines[2+i], name)
		}
	}
	if !strings.Contains(lines[4], "skipped: ") {
		t.Errorf("onnx row %q does not say why it was skipped", lines[4])
	}
	var pt bytes.Buffer
	if err := report.WriteProfileTable(&pt, r); err != nil {
		t.Fatal(err)
	}
	if strings.Count(pt.String(), "| cpu |") != 2 || !strings.Contains(pt.String(), "ms per prompt of") {
		t.Errorf("profile tables (per token, per prompt) lack cpu:\n%s", pt.String())
	}
}

// A worker that dies is a failed row with its last words; a missing model is
// a failed row; neither stops the report.
func TestReportFailures(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	model := tinyGGUF(t)
	o := report.Options{Backends: []string{"cpu"}, Models: map[string]string{"": model}, PromptIDs: []int32{1, 2}, N: 2, Runs: 1, Threads: 1, Context: 16}
	r, err := report.Run(context.Background(), o, report.Exec([]string{exe}, workerEnv+"=crash"))
	if err != nil {
		t.Fatal(err)
	}
	if b := r.Backends[0]; b.Status != report.StatusFailed || !strings.Contains(b.Reason, "simulated crash") {
		t.Errorf("crashed worker: status %q reason %q", b.Status, b.Reason)
	}

	o.Models[""] = filepath.Join(t.TempDir(), "missing.gguf")
	r, err = report.Run(context.Background(), o, report.InProcess)
	if err != nil {
		t.Fatal(err)
	}
	if b := r.Backends[0]; b.Status != report.StatusFailed || !strings.Contains(b.Reason, "missing.gguf") {
		t.Errorf("missing model: status %q reason %q", b.Status, b.Reason)
	}

	// A text prompt goes through the model's own tokenizer, in process.
	res := report.Measure(report.Job{Backend: "cpu", Model: model, Prompt: "Once upon a time", N: 3, Runs: 1, Threads: 1, Context: 64})
	if res.Status != report.StatusOK || res.PromptTokens == 0 || len(res.GapsUs) != 1 || len(res.GapsUs[0]) != 2 {
		t.Errorf("text prompt: status %q (%s), %d prompt tokens", res.Status, res.Reason, res.PromptTokens)
	}
}

func TestReportRejectsBadOptions(t *testing.T) {
	good := report.Options{Backends: []string{"cpu"}, Models: map[string]string{"": "m.gguf"}, Prompt: "x", N: 4, Runs: 1}
	tests := []struct {
		name string
		edit func(*report.Options)
		want string
	}{
		{"unknown backend", func(o *report.Options) { o.Backends = []string{"cuda"} }, `unknown backend "cuda"`},
		{"no backends", func(o *report.Options) { o.Backends = nil }, "no backends"},
		{"twice", func(o *report.Options) { o.Backends = []string{"cpu", "cpu"} }, "named twice"},
		{"one token", func(o *report.Options) { o.N = 1 }, "at least 2 tokens"},
		{"no runs", func(o *report.Options) { o.Runs = 0 }, "--runs 0"},
		{"empty prompt", func(o *report.Options) { o.Prompt = "" }, "empty prompt"},
		{"model for an absent backend", func(o *report.Options) { o.Models["onnx"] = "dir" }, `model given for "onnx"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := good
			o.Models = map[string]string{"": "m.gguf"}
			tc.edit(&o)
			_, err := report.Run(context.Background(), o, report.InProcess)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
	if _, err := report.Run(context.Background(), good, nil); err == nil {
		t.Error("Run without a runner succeeded")
	}
}

// A worker fed garbage says so instead of measuring.
func TestWorkerRejectsBadJob(t *testing.T) {
	var out bytes.Buffer
	err := report.Worker(strings.NewReader(`{"backend":"cpu","bogus":1}`), &out)
	if err == nil || out.Len() != 0 {
		t.Errorf("err %v, output %q: want an error and no result", err, out.String())
	}
	res := report.Measure(report.Job{Backend: "cpu", Model: "x.gguf", Prompt: "p", N: 1, Runs: 1})
	if res.Status != report.StatusFailed || !strings.Contains(res.Reason, "at least 2") {
		t.Errorf("N=1 job: %q %q", res.Status, res.Reason)
	}
}

// decodeWeightBytes is the bytes of a GGUF file's matrices that every
// decode step multiplies by: the layers' 2-D weights and the output head
// (the embedding table where it is tied).
func decodeWeightBytes(t *testing.T, path string) int64 {
	t.Helper()
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var n, embd int64
	tied := true
	for _, ti := range f.Tensors {
		switch {
		case ti.Name == "token_embd.weight":
			embd = ti.Size
		case ti.Name == "output.weight":
			tied = false
			n += ti.Size
		case strings.HasPrefix(ti.Name, "blk.") && len(ti.Dims) == 2:
			n += ti.Size
		}
	}
	if tied {
		n += embd
	}
	return n
}
