package backend_test

import (
	"errors"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/glint-llm/glint/backend"
	"github.com/glint-llm/glint/backend/cpu"
	"github.com/glint-llm/glint/dtype"
	"github.com/glint-llm/glint/engine"
	"github.com/glint-llm/glint/layers"
	"github.com/glint-llm/glint/model/load"
	"github.com/glint-llm/glint/model/synth"
)

func loadTiny(t *testing.T, b backend.Backend) *layers.Model {
	t.Helper()
	p := filepath.Join(t.TempDir(), "tiny.gguf")
	if err := synth.WriteGGUF(p, synth.Options{Shape: "tiny", Type: "F32", Seed: 11, Std: 0.2}); err != nil {
		t.Fatal(err)
	}
	f, err := load.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	m, err := layers.Load(b, f.Config, f.Source, layers.Options{Context: 32})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

func logitsAfter(t *testing.T, m engine.Model, tokens ...[]int32) []float32 {
	t.Helper()
	pos := 0
	for _, tok := range tokens {
		if err := m.Decode(engine.Batch(0, pos, tok)); err != nil {
			t.Fatal(err)
		}
		pos += len(tok)
	}
	out := make([]float32, m.Vocab())
	if err := m.Logits(0, out); err != nil {
		t.Fatal(err)
	}
	return out
}

// The wrapper forwards every op unchanged: a model on Profiled(cpu) computes
// bit for bit what it computes on a bare cpu backend, and every op kind of a
// Llama step shows up in the profile.
func TestProfiledForwardsAndCounts(t *testing.T) {
	bare := cpu.New(1)
	defer bare.Close()
	p := backend.Profiled(cpu.New(1))
	defer p.Close()
	if p.Name() != bare.Name() || p.Device() != bare.Device() {
		t.Errorf("Name/Device %q/%q, want the inner %q/%q", p.Name(), p.Device(), bare.Name(), bare.Device())
	}
	want := logitsAfter(t, loadTiny(t, bare), []int32{1, 2, 3}, []int32{4})
	m := loadTiny(t, p)
	p.Reset() // loading ran no ops worth keeping
	got := logitsAfter(t, m, []int32{1, 2, 3}, []int32{4})
	if !slices.Equal(got, want) {
		t.Fatal("logits through the profiled backend differ from the bare backend's")
	}
	if err := m.Argmax(make([]int32, 1)); err != nil {
		t.Fatal(err)
	}

	prof, calls := p.Profile(), p.Calls()
	for _, k := range []string{backend.OpMatMul, backend.OpAttention, backend.OpNorm, backend.OpRoPE,
		backend.OpEmbedding, backend.OpSiLUMul, backend.OpAdd, backend.OpCopy, backend.OpArgmax} {
		if calls[k] == 0 || prof[k] <= 0 {
			t.Errorf("%s: %d calls, %v: want some of both", k, calls[k], prof[k])
		}
	}
	for k := range calls {
		if !slices.Contains(backend.OpKinds, k) {
			t.Errorf("kind %q is not in OpKinds", k)
		}
	}
	// Two Decodes gather embeddings twice; one Argmax call launches one argmax.
	if calls[backend.OpEmbedding] != 2 || calls[backend.OpArgmax] != 1 {
		t.Errorf("embedding %d, argmax %d calls: want 2 and 1", calls[backend.OpEmbedding], calls[backend.OpArgmax])
	}

	p.Reset()
	if len(p.Profile()) != 0 || len(p.Calls()) != 0 {
		t.Errorf("after Reset: %v, %v", p.Profile(), p.Calls())
	}
	p.SetEnabled(false)
	m.SeqRemove(0, -1, -1)
	logitsAfter(t, m, []int32{1, 2, 3})
	if len(p.Profile()) != 0 {
		t.Errorf("disabled wrapper recorded %v", p.Profile())
	}
}

// lazy is a CPU backend that pretends its matmuls run asynchronously: the
// work is only "done" (slept) at Sync, as on a device queue.
type lazy struct {
	*cpu.Backend
	pending time.Duration
}

const deviceTime = 30 * time.Millisecond

func (l *lazy) MatMulTransposed(dst, x, w backend.Tensor, n int) {
	l.Backend.MatMulTransposed(dst, x, w, n)
	l.pending += deviceTime
}

func (l *lazy) Sync() error {
	time.Sleep(l.pending)
	l.pending = 0
	return l.Backend.Sync()
}

// Asynchronous device work is charged to the op that queued it, because the
// wrapper drains the queue after each op; disabled, it does not.
func TestProfiledAttributesQueuedWork(t *testing.T) {
	l := &lazy{Backend: cpu.New(1)}
	p := backend.Profiled(l)
	defer p.Close()
	alloc := func(shape ...int) backend.Tensor {
		x, err := p.Alloc(dtype.F32, shape...)
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
	x, w, y := alloc(1, 8), alloc(4, 8), alloc(1, 4)

	p.MatMulTransposed(y, x, w, 1)
	if l.pending != 0 {
		t.Fatal("the wrapper did not wait for the queued matmul")
	}
	p.Add(y, y, y, 1)
	if got := p.Profile()[backend.OpMatMul]; got < deviceTime {
		t.Errorf("matmul charged %v, want at least its queued %v", got, deviceTime)
	}
	if err := p.Sync(); err != nil {
		t.Fatal(err)
	}

	p.Reset()
	p.SetEnabled(false)
	p.MatMulTransposed(y, x, w, 1)
	if l.pending != deviceTime {
		t.Errorf("disabled wrapper synchronised (pending %v)", l.pending)
	}
	if len(p.Profile()) != 0 {
		t.Errorf("disabled wrapper recorded %v", p.Profile())
	}
	if p.Unwrap() != backend.Backend(l) {
		t.Error("Unwrap does not return the wrapped backend")
	}
}

// A bad op through the wrapper is recorded by the inner backend, as without
// it: no panic, and the error surfaces from Err and Sync.
func TestProfiledKeepsErrors(t *testing.T) {
	p := backend.Profiled(cpu.New(1))
	defer p.Close()
	a, err := p.Alloc(dtype.F32, 2, 8)
	if err != nil {
		t.Fatal(err)
	}
	b, err := p.Alloc(dtype.F32, 2, 4)
	if err != nil {
		t.Fatal(err)
	}
	p.Add(a, a, b, 2)
	if err := p.Sync(); !errors.Is(err, backend.ErrShape) {
		t.Errorf("Sync after a mismatched Add: %v, want ErrShape", err)
	}
	if err := p.Err(); !errors.Is(err, backend.ErrShape) {
		t.Errorf("Err: %v, want ErrShape", err)
	}
}

// Kinds puts the op kinds first, in their order, then the names only some
// profiles hold (fused launches), sorted, each once.
func TestProfileKinds(t *testing.T) {
	a := map[string]time.Duration{backend.OpAdd: 1, "fused:matmul+add": 2}
	b := map[string]time.Duration{"fused:norm+matmul×2+silu_mul": 3, "fused:matmul+add": 4}
	got := backend.Kinds(a, b)
	want := append(slices.Clone(backend.OpKinds), "fused:matmul+add", "fused:norm+matmul×2+silu_mul")
	if !slices.Equal(got, want) {
		t.Errorf("Kinds: %v, want %v", got, want)
	}
}
