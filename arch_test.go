package glint_test

import (
	"math"
	"path/filepath"
	"testing"

	"github.com/glint-llm/glint"
	"github.com/glint-llm/glint/engine"
	"github.com/glint-llm/glint/model/synth"
	"github.com/glint-llm/glint/sample"
)

// Three engines on one Gemma 3: glint's native layers on the CPU and on
// OpenCL, and ONNX Runtime running the same weights as a float32 ONNX graph
// written from transformers' definition (synth.WriteONNX). Fed ORT's greedy
// ids from a 12-token prompt (past the sliding window of 8, so sliding
// layers drop positions) for 8 steps, the native paths pick the same ids and
// their logits stay within 1e-3 of ORT's. The differences are float32 sums
// in other orders and GELU: llama.cpp's arithmetic, which glint follows,
// rounds its argument and result to f16 (≲ 5e-4 relative per activation),
// where ORT computes it in float32. The KV caches are F32, as ORT's are.
func TestGemma3VsONNXRuntime(t *testing.T) {
	dir := t.TempDir()
	o := synth.Options{Arch: "gemma3", Shape: "gemma3-tiny", Type: "F32", Seed: 11, Std: 0.05}
	gg, ox := filepath.Join(dir, "gemma3.gguf"), filepath.Join(dir, "onnx")
	if err := synth.WriteGGUF(gg, o); err != nil {
		t.Fatal(err)
	}
	if err := synth.WriteONNX(ox, o); err != nil {
		t.Fatal(err)
	}
	ort, err := glint.Open(ox, glint.Options{Backend: "onnx", Threads: 1})
	if err != nil {
		t.Skipf("ONNX Runtime: %v (make onnxruntime)", err)
	}
	defer ort.Close()
	prompt := []int32{2, 17, 42, 99, 7, 250, 3, 64, 128, 5, 11, 300}
	const steps = 8
	var ids []int32
	var want [][]float32
	batch := prompt
	os, err := ort.NewSession(engine.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for range steps {
		if err := os.Prefill(t.Context(), batch); err != nil {
			t.Fatal(err)
		}
		row := make([]float32, ort.Vocab())
		if err := os.Logits(t.Context(), row); err != nil {
			t.Fatal(err)
		}
		want = append(want, row)
		best := sample.Argmax(row)
		ids, batch = append(ids, best), []int32{best}
	}
	for _, be := range []string{"cpu", "opencl"} {
		t.Run(be, func(t *testing.T) {
			m, err := glint.Open(gg, glint.Options{Backend: be, Context: 64, CacheTypeK: "f32", CacheTypeV: "f32"})
			if err != nil {
				if be == "opencl" {
					t.Skipf("no OpenCL device: %v", err)
				}
				t.Fatal(err)
			}
			defer m.Close()
			batch := prompt
			var worst float64
			s, err := m.NewSession(engine.SessionOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for step := range steps {
				if err := s.Prefill(t.Context(), batch); err != nil {
					t.Fatal(err)
				}
				got := make([]float32, m.Vocab())
				if err := s.Logits(t.Context(), got); err != nil {
					t.Fatal(err)
				}
				var d float64
				for i := range got {
					d = math.Max(d, math.Abs(float64(got[i]-want[step][i])))
				}
				worst = math.Max(worst, d)
				if d > 1e-3 {
					t.Errorf("step %d: max |Δlogit| %.3g against ONNX Runtime", step, d)
				}
				if top, gap := sample.TopGap(want[step]); sample.Argmax(got) != top && gap >= 1e-3 {
					t.Errorf("step %d: glint picks %d, ONNX Runtime %d (gap %.3g)", step, sample.Argmax(got), top, gap)
				}
				batch = []int32{ids[step]}
			}
			t.Logf("%s: worst max |Δlogit| %.3g over %d steps", be, worst, steps)
		})
	}
}
