package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"

	"github.com/glint-llm/glint/internal/shared"
	"github.com/glint-llm/glint/model/synth"
	"github.com/glint-llm/glint/report"
)

// mainEnv makes the test binary run main() itself: the report re-executes
// os.Executable() (here, this test binary) as its per-backend worker, and
// the child inherits the environment that says so.
const mainEnv = "GLINT_GENERATE_TEST_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(mainEnv) == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// The report subcommand end to end, through the CLI and its worker
// processes, on the tiny synthetic model.
func TestReportCommand(t *testing.T) {
	t.Setenv(mainEnv, "1") // for the children only: this process is already past TestMain
	dir := t.TempDir()
	model := filepath.Join(dir, "tiny.gguf")
	if err := synth.WriteGGUF(model, synth.Options{Shape: "tiny", Type: "F32", Seed: 4, Std: 0.2}); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	app := &cli.App{Name: "generate", Commands: []*cli.Command{reportCommand()}, ExitErrHandler: func(*cli.Context, error) {}}
	err := app.Run([]string{"generate", "report", "-b", "cpu,onnx", "-m", model, "-p", "Once upon a time", "-n", "3", "--runs", "2",
		"-t", "1", "-c", "64", "--out", out})
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(out, report.JSONName))
	if err != nil {
		t.Fatal(err)
	}
	var r report.Report
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	if r.SchemaVersion != report.SchemaVersion || len(r.Backends) != 2 {
		t.Fatalf("schema %d with %d backends", r.SchemaVersion, len(r.Backends))
	}
	cpu, onnx := r.Backends[0], r.Backends[1]
	if cpu.Status != report.StatusOK || len(cpu.GapsUs) != 2 || len(cpu.GapsUs[1]) != 2 || cpu.PromptTokens == 0 {
		t.Errorf("cpu: %q %s, gaps %v, %d prompt tokens", cpu.Status, cpu.Reason, cpu.GapsUs, cpu.PromptTokens)
	}
	if onnx.Status != report.StatusSkipped || !strings.Contains(onnx.Reason, "-m onnx=") {
		t.Errorf("onnx without a model: status %q reason %q", onnx.Status, onnx.Reason)
	}
	if _, err := os.Stat(filepath.Join(out, report.SVGName)); err != nil {
		t.Error(err)
	}
}

func TestParseModels(t *testing.T) {
	tests := []struct {
		in   []string
		want map[string]string
		err  string
	}{
		{[]string{"a.gguf"}, map[string]string{"": "a.gguf"}, ""},
		{[]string{"a.gguf", "onnx=dir"}, map[string]string{"": "a.gguf", "onnx": "dir"}, ""},
		{[]string{"x=y.gguf"}, map[string]string{"": "x=y.gguf"}, ""},
		{[]string{"opencl=q.gguf", "cpu=f.gguf"}, map[string]string{"opencl": "q.gguf", "cpu": "f.gguf"}, ""},
		{nil, nil, "no model"},
		{[]string{"cpu="}, nil, "empty path"},
		{[]string{"a.gguf", "b.gguf"}, nil, "already"},
	}
	for _, tc := range tests {
		got, err := parseModels(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("parseModels(%q): %v, want an error with %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || len(got) != len(tc.want) {
			t.Errorf("parseModels(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
			continue
		}
		for k, v := range tc.want {
			if got[k] != v {
				t.Errorf("parseModels(%q)[%q] = %q, want %q", tc.in, k, got[k], v)
			}
		}
	}
}

// The speculative flags reach the report's workers: ngram-simple on a
// model whose stories repeat themselves verifies several tokens per target
// pass; without the flags the report has no speculative figures at all.
func TestReportSpeculative(t *testing.T) {
	model := shared.Models(t, "stories260K/stories260K.gguf")
	t.Setenv(mainEnv, "1")
	const n, runs = 128, 2
	report1 := func(t *testing.T, extra ...string) (report.Report, string) {
		out := t.TempDir()
		app := &cli.App{Name: "generate", Commands: []*cli.Command{reportCommand()}, ExitErrHandler: func(*cli.Context, error) {}}
		args := append([]string{"generate", "report", "-b", "cpu", "-m", model, "-p", "Once upon a time", "-n", fmt.Sprint(n),
			"--runs", fmt.Sprint(runs), "-t", "1", "-c", "256", "--out", out}, extra...)
		if err := app.Run(args); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(out, report.JSONName))
		if err != nil {
			t.Fatal(err)
		}
		var r report.Report
		if err := json.Unmarshal(b, &r); err != nil {
			t.Fatal(err)
		}
		if len(r.Backends) != 1 || r.Backends[0].Status != report.StatusOK {
			t.Fatalf("backends %+v", r.Backends)
		}
		return r, string(b)
	}

	r, _ := report1(t, "--spec-type", "ngram-simple", "--draft-max", "8")
	if s := r.Settings.Speculative; s == nil || s.Type != "ngram-simple" || s.DraftMax != 8 {
		t.Errorf("settings.speculative = %+v, want ngram-simple with draft_max 8", s)
	}
	s := r.Backends[0].Speculative
	if s == nil {
		t.Fatal("no speculative figures with --spec-type ngram-simple")
	}
	if s.Off != "" || s.Passes >= runs*n || s.TokensPerPass <= 1 || s.Accepted == 0 || s.Accepted > s.Drafted {
		t.Errorf("speculative %+v: want fewer than %d passes for %d tokens, > 1 token per pass, 0 < accepted <= drafted", s, runs*n, runs*n)
	}
	if got := float64(runs*n) / float64(s.Passes); got != s.TokensPerPass {
		t.Errorf("tokens per pass %v, want %d/%d = %v", s.TokensPerPass, runs*n, s.Passes, got)
	}

	r, js := report1(t)
	if r.Settings.Speculative != nil || strings.Contains(js, `"speculative"`) {
		t.Errorf("without speculation: settings %+v, backend %+v", r.Settings.Speculative, r.Backends[0].Speculative)
	}
}
