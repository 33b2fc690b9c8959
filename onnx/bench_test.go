package onnx

import (
	"runtime"
	"testing"

	"github.com/glint-llm/glint/internal/shared"
	"github.com/glint-llm/glint/onnx/onnxtest"
)

// benchModels are the decoders the benchmarks run: the Gemma 3 270M
// signature (18 layers, KV 1×256) and the staged GPT-2 with stacked caches.
func benchModels(b *testing.B) map[string]string {
	return map[string]string{
		"gemma-like": sharedGemma(b),
		"gpt2":       shared.Models(b, "onnx-genai-test/tiny-random-gpt2-fp32"),
	}
}

// BenchmarkPrefill is time to first token for a 16-token prompt (one op =
// one prompt pass from an empty cache).
func BenchmarkPrefill(b *testing.B) {
	for name, dir := range benchModels(b) {
		b.Run(name, func(b *testing.B) {
			m := open(b, dir)
			prompt := make([]int32, 16)
			for i := range prompt {
				prompt[i] = int32(10 + i)
			}
			b.ReportAllocs()
			for b.Loop() {
				m.Reset()
				if err := m.Eval(prompt); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkDecode is time between tokens: one op = one single-token pass
// plus the host argmax, with the cache between 16 and 16+256 positions.
func BenchmarkDecode(b *testing.B) {
	for name, dir := range benchModels(b) {
		b.Run(name, func(b *testing.B) {
			m := open(b, dir)
			b.ReportAllocs()
			tok, best := int32(10), make([]int32, 1)
			for b.Loop() {
				if m.Pos() == 0 || m.Pos() >= 16+256 {
					b.StopTimer()
					m.Reset()
					if err := m.Eval(make([]int32, 16)); err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
				}
				if err := m.Eval([]int32{tok}); err != nil {
					b.Fatal(err)
				}
				if err := m.Argmax(best); err != nil {
					b.Fatal(err)
				}
				tok = best[0]
			}
		})
	}
}

// TestHeapPerToken measures Go heap use while decoding: the cache lives in
// buffers reused across steps, so after the buffers have reached their size
// the live heap must not grow with the tokens and each step allocates only
// small wrappers (about ten per bound tensor: 382 objects, 11 KiB a token
// on the 18-layer model). The 32 KiB bound sits below the 36 KiB of KV a
// single token adds, so any per-step copy of the cache would trip it.
func TestHeapPerToken(t *testing.T) {
	m := open(t, sharedGemma(t))
	const warm, steps = 32, 64
	tok, best := int32(onnxtest.BOSID), make([]int32, 1)
	step := func() {
		if err := m.Eval([]int32{tok}); err != nil {
			t.Fatal(err)
		}
		if err := m.Argmax(best); err != nil {
			t.Fatal(err)
		}
		tok = best[0]
	}
	// Grow the buffers to their final capacity first (they start at 64
	// positions and double: 96 positions need 128).
	for m.Pos() < warm+steps {
		step()
	}
	m.Reset()
	for m.Pos() < warm {
		step()
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := 0; i < steps; i++ {
		step()
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	allocPerTok := float64(after.TotalAlloc-before.TotalAlloc) / steps
	liveGrowth := (int64(after.HeapAlloc) - int64(before.HeapAlloc)) / steps
	t.Logf("per token: %.0f B allocated (%.1f objects), live heap growth %d B", allocPerTok,
		float64(after.Mallocs-before.Mallocs)/steps, liveGrowth)
	if allocPerTok > 32<<10 {
		t.Errorf("%.0f B allocated per token, want < 32 KiB", allocPerTok)
	}
	if liveGrowth > 1<<10 {
		t.Errorf("live heap grows %d B per token, want ~0", liveGrowth)
	}
}
