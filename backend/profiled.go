package backend

import (
	"sync"
	"time"

	"github.com/glint-llm/glint/dtype"
)

// The op kinds a ProfiledBackend reports. Several ops share a kind where
// they are the same data movement (Copy and CopySlice) or the same kind of
// elementwise pass (Add and AddBias; Scale and SoftCap; GELU and GELUMul;
// RMSNorm and LayerNorm).
const (
	OpMatMul    = "matmul"
	OpAttention = "attention"
	OpNorm      = "norm"
	OpRoPE      = "rope"
	OpEmbedding = "embedding"
	OpSiLUMul   = "silu_mul"
	OpGELU      = "gelu"
	OpAdd       = "add"
	OpScale     = "scale"
	OpCopy      = "copy"
	OpArgmax    = "argmax"
	// OpTransfer is host↔device copies (Read*/Write*): not a compute op,
	// but time the token spends all the same.
	OpTransfer = "transfer"
)

// OpKinds lists every kind in a stable order, for tables.
var OpKinds = []string{OpMatMul, OpAttention, OpNorm, OpRoPE, OpEmbedding, OpSiLUMul, OpGELU, OpAdd, OpScale, OpCopy, OpArgmax, OpTransfer}

// ProfiledBackend wraps a Backend, forwards every call to it, and adds up
// the wall time of each op by kind.
//
// To attribute asynchronous device work to the op that queued it, the
// wrapper calls the inner Sync after every op. That serialises the queue:
// what it measures is the time of each op on its own, not the overlap a
// device could find between consecutive ops, so a profiled token is slower
// than an unprofiled one and the timings of a report should come from runs
// with profiling switched off (SetEnabled).
//
// Like the backends it wraps, it is not safe for concurrent use by several
// goroutines, except Profile, Reset and SetEnabled, which may be called
// from any goroutine.
type ProfiledBackend struct {
	inner Backend

	mu      sync.Mutex
	enabled bool
	total   map[string]time.Duration
	calls   map[string]int64
}

var _ Backend = (*ProfiledBackend)(nil)

// Profiled returns b wrapped for profiling, enabled.
func Profiled(b Backend) *ProfiledBackend {
	return &ProfiledBackend{inner: b, enabled: true, total: map[string]time.Duration{}, calls: map[string]int64{}}
}

// Unwrap returns the wrapped backend (to reach backend-specific methods such
// as the OpenCL launch counters).
func (p *ProfiledBackend) Unwrap() Backend { return p.inner }

// SetEnabled switches timing on or off. While off, calls are forwarded
// without the extra Sync, so the wrapped backend runs at full speed.
func (p *ProfiledBackend) SetEnabled(on bool) {
	p.mu.Lock()
	p.enabled = on
	p.mu.Unlock()
}

// Profile returns the accumulated time per op kind since Profiled or Reset.
// Kinds never called are absent.
func (p *ProfiledBackend) Profile() map[string]time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[string]time.Duration, len(p.total))
	for k, v := range p.total {
		out[k] = v
	}
	return out
}

// Calls returns how many ops of each kind were timed since Profiled or Reset.
func (p *ProfiledBackend) Calls() map[string]int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[string]int64, len(p.calls))
	for k, v := range p.calls {
		out[k] = v
	}
	return out
}

// Reset zeroes the profile.
func (p *ProfiledBackend) Reset() {
	p.mu.Lock()
	clear(p.total)
	clear(p.calls)
	p.mu.Unlock()
}

// timed runs op and, when enabled, charges its time (up to the inner Sync
// that drains what it queued) to kind. An error from that Sync is sticky in
// the inner backend, so it surfaces at the caller's next Sync or Err.
func (p *ProfiledBackend) timed(kind string, op func()) {
	p.mu.Lock()
	on := p.enabled
	p.mu.Unlock()
	if !on {
		op()
		return
	}
	start := time.Now()
	op()
	_ = p.inner.Sync()
	d := time.Since(start)
	p.mu.Lock()
	p.total[kind] += d
	p.calls[kind]++
	p.mu.Unlock()
}

func (p *ProfiledBackend) Name() string   { return p.inner.Name() }
func (p *ProfiledBackend) Device() string { return p.inner.Device() }

func (p *ProfiledBackend) Alloc(dt dtype.Type, shape ...int) (Tensor, error) {
	return p.inner.Alloc(dt, shape...)
}

func (p *ProfiledBackend) Weight(name string, dt dtype.Type, shape []int, data []byte) (Tensor, error) {
	return p.inner.Weight(name, dt, shape, data)
}

func (p *ProfiledBackend) Free(t Tensor) { p.inner.Free(t) }

func (p *ProfiledBackend) WriteF32(t Tensor, off int, src []float32) (err error) {
	p.timed(OpTransfer, func() { err = p.inner.WriteF32(t, off, src) })
	return err
}

func (p *ProfiledBackend) ReadF32(t Tensor, off int, dst []float32) (err error) {
	p.timed(OpTransfer, func() { err = p.inner.ReadF32(t, off, dst) })
	return err
}

func (p *ProfiledBackend) WriteI32(t Tensor, off int, src []int32) (err error) {
	p.timed(OpTransfer, func() { err = p.inner.WriteI32(t, off, src) })
	return err
}

func (p *ProfiledBackend) ReadI32(t Tensor, off int, dst []int32) (err error) {
	p.timed(OpTransfer, func() { err = p.inner.ReadI32(t, off, dst) })
	return err
}

func (p *ProfiledBackend) Embedding(dst, table, ids Tensor, n int) {
	p.timed(OpEmbedding, func() { p.inner.Embedding(dst, table, ids, n) })
}

func (p *ProfiledBackend) MatMulTransposed(dst, x, w Tensor, n int) {
	p.timed(OpMatMul, func() { p.inner.MatMulTransposed(dst, x, w, n) })
}

func (p *ProfiledBackend) RMSNorm(dst, x, w Tensor, n int, eps float32) {
	p.timed(OpNorm, func() { p.inner.RMSNorm(dst, x, w, n, eps) })
}

func (p *ProfiledBackend) RoPE(x Tensor, n, heads, headDim int, pos Tensor, r Rope) {
	p.timed(OpRoPE, func() { p.inner.RoPE(x, n, heads, headDim, pos, r) })
}

func (p *ProfiledBackend) SiLUMul(dst, gate, up Tensor, n int) {
	p.timed(OpSiLUMul, func() { p.inner.SiLUMul(dst, gate, up, n) })
}

func (p *ProfiledBackend) Add(dst, a, b Tensor, n int) {
	p.timed(OpAdd, func() { p.inner.Add(dst, a, b, n) })
}

func (p *ProfiledBackend) LayerNorm(dst, x, w, b Tensor, n int, eps float32) {
	p.timed(OpNorm, func() { p.inner.LayerNorm(dst, x, w, b, n, eps) })
}

func (p *ProfiledBackend) GELUMul(dst, gate, up Tensor, n int) {
	p.timed(OpGELU, func() { p.inner.GELUMul(dst, gate, up, n) })
}

func (p *ProfiledBackend) GELU(dst, x Tensor, n int) {
	p.timed(OpGELU, func() { p.inner.GELU(dst, x, n) })
}

func (p *ProfiledBackend) AddBias(dst, x, bias Tensor, n int) {
	p.timed(OpAdd, func() { p.inner.AddBias(dst, x, bias, n) })
}

func (p *ProfiledBackend) Scale(dst, x Tensor, n int, s float32) {
	p.timed(OpScale, func() { p.inner.Scale(dst, x, n, s) })
}

func (p *ProfiledBackend) SoftCap(x Tensor, n int, c float32) {
	p.timed(OpScale, func() { p.inner.SoftCap(x, n, c) })
}

func (p *ProfiledBackend) CopySlice(dst Tensor, dstOff int, src Tensor, srcOff, count int) {
	p.timed(OpCopy, func() { p.inner.CopySlice(dst, dstOff, src, srcOff, count) })
}

func (p *ProfiledBackend) Attention(out, q, k, v Tensor, n int, kv KVView, a Attn) {
	p.timed(OpAttention, func() { p.inner.Attention(out, q, k, v, n, kv, a) })
}

func (p *ProfiledBackend) Argmax(dst, x Tensor, n int) {
	p.timed(OpArgmax, func() { p.inner.Argmax(dst, x, n) })
}

func (p *ProfiledBackend) Sync() error  { return p.inner.Sync() }
func (p *ProfiledBackend) Err() error   { return p.inner.Err() }
func (p *ProfiledBackend) Close() error { return p.inner.Close() }
