package load_test

import (
	"context"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"github.com/glint-llm/glint/backend"
	"github.com/glint-llm/glint/backend/cpu"
	"github.com/glint-llm/glint/backend/opencl"
	"github.com/glint-llm/glint/engine"
	"github.com/glint-llm/glint/internal/cltest"
	"github.com/glint-llm/glint/layers"
	"github.com/glint-llm/glint/model/load"
	"github.com/glint-llm/glint/model/quant"
	"github.com/glint-llm/glint/model/synth"
)

// A half-precision Hugging Face folder runs, and gives the greedy ids of the
// GGUF file of the same weights (converted as llama-quantize converts it,
// norms in F32) on the CPU and on every OpenCL device.
func TestHalfPrecisionHFRuns(t *testing.T) {
	backends := map[string]func() (backend.Backend, error){"cpu": func() (backend.Backend, error) { return cpu.New(1), nil }}
	names := []string{"cpu"}
	if _, err := opencl.Devices(); err == nil {
		for _, d := range cltest.Devices(t) {
			name := "opencl-" + d.ShortName()
			backends[name] = func() (backend.Backend, error) { return opencl.New(opencl.Options{Device: strconv.Itoa(d.Index)}) }
			names = append(names, name)
		}
	}
	for _, typ := range []string{"BF16", "F16"} {
		dir := filepath.Join(t.TempDir(), "hf-"+typ)
		if err := synth.WriteHF(dir, synth.Options{Shape: "tiny", Type: typ, Seed: 5, Std: 0.2}); err != nil {
			t.Fatal(err)
		}
		gg := filepath.Join(t.TempDir(), typ+".gguf")
		ft, err := quant.LookupFileType(typ)
		if err != nil {
			t.Fatal(err)
		}
		if err := quant.Quantize(dir, gg, ft, quant.Options{}); err != nil {
			t.Fatal(err)
		}
		for _, name := range names {
			b, err := backends[name]()
			if err != nil {
				t.Logf("%s: skipping %s: %v", typ, name, err)
				continue
			}
			want := greedy(t, b, gg)
			got := greedy(t, b, dir)
			b.Close()
			if !slices.Equal(got, want) {
				t.Errorf("%s on %s: folder gives %v, GGUF %v", typ, name, got, want)
			}
		}
	}
}

func greedy(t *testing.T, b backend.Backend, path string) []int32 {
	t.Helper()
	f, err := load.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m, err := layers.Load(b, f.Config, f.Source, layers.Options{Context: 64})
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	e := engine.New(m)
	defer e.Close()
	tm, err := engine.Generate(context.Background(), e, []int32{1, 40, 300, 7, 99}, engine.Options{MaxTokens: 12})
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return tm.Generated
}
