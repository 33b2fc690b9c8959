package backend

import (
	"slices"
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

// LaunchTimer is a backend that times its own launches on the device
// (OpenCL's event profiling). A ProfiledBackend over one sets the kind of
// each op before forwarding it instead of synchronising after it: a backend
// that holds ops back to fuse them (backend/opencl/fuse.go) would launch
// them one by one at each Sync, and the profile would show the costs of an
// unfused run.
type LaunchTimer interface {
	// TimeLaunches charges the device time of the launches queued from now
	// on to kind (one that fuses several ops to a name of its own, "fused:…")
	// until the next call; "" stops.
	TimeLaunches(kind string)
	// LaunchTimes waits for queued work and returns, and forgets, the time
	// and launches charged to each name.
	LaunchTimes() map[string]LaunchTime
}

// LaunchTime is the device time of the launches charged to one name.
type LaunchTime struct {
	Total    time.Duration
	Launches int64
}

// Kinds lists OpKinds and then, sorted, the other names the profiles hold
// (fused launches'), for tables.
func Kinds[V any](profiles ...map[string]V) []string {
	kinds := append([]string(nil), OpKinds...)
	var more []string
	for _, p := range profiles {
		for k := range p {
			if !slices.Contains(kinds, k) && !slices.Contains(more, k) {
				more = append(more, k)
			}
		}
	}
	slices.Sort(more)
	return append(kinds, more...)
}

// ProfiledBackend wraps a Backend, forwards every call to it, and adds up
// the time of each op by kind.
//
// To attribute asynchronous device work to the op that queued it, the
// wrapper calls the inner Sync after every op and charges the wall time.
// That serialises the queue: what it measures is the time of each op on its
// own, not the overlap a device could find between consecutive ops, so a
// profiled token is slower than an unprofiled one and the timings of a
// report should come from runs with profiling switched off (SetEnabled).
// Over a LaunchTimer (OpenCL) it does not synchronise: each op's kind is
// charged the device time of the launches it queues, and a launch that
// fuses several ops is charged to its own name ("fused:norm+matmul×3+…"),
// its ops to nothing; Calls are then launches. The device times are
// gathered at each transfer and Sync (transfers themselves are wall time,
// after the queued work is done).
//
// Like the backends it wraps, it is not safe for concurrent use by several
// goroutines, except Profile, Calls, Reset and SetEnabled, which may be
// called from any goroutine.
type ProfiledBackend struct {
	inner Backend
	// timer is inner as a LaunchTimer, if it is one; timing, whether it is
	// charging launches (used by the backend's goroutine only).
	timer  LaunchTimer
	timing bool

	mu      sync.Mutex
	enabled bool
	total   map[string]time.Duration
	calls   map[string]int64
}

var _ Backend = (*ProfiledBackend)(nil)

// Profiled returns b wrapped for profiling, enabled.
func Profiled(b Backend) *ProfiledBackend {
	timer, _ := b.(LaunchTimer)
	return &ProfiledBackend{inner: b, timer: timer, enabled: true, total: map[string]time.Duration{}, calls: map[string]int64{}}
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
	if p.timer != nil {
		p.timedLaunches(kind, on, op)
		return
	}
	if !on {
		op()
		return
	}
	start := time.Now()
	op()
	_ = p.inner.Sync()
	p.add(kind, time.Since(start), 1)
}

// timedLaunches is timed over a LaunchTimer: the op's launches are charged
// to kind by the inner backend, without a Sync; a transfer waits for the
// queued work first, gathering its times, and is timed itself.
func (p *ProfiledBackend) timedLaunches(kind string, on bool, op func()) {
	if !on {
		if p.timing {
			p.gather()
			p.timer.TimeLaunches("")
			p.timing = false
		}
		op()
		return
	}
	p.timing = true
	if kind != OpTransfer {
		p.timer.TimeLaunches(kind)
		op()
		return
	}
	p.gather()
	start := time.Now()
	op()
	_ = p.inner.Sync()
	p.add(kind, time.Since(start), 1)
}

// gather waits for the inner backend's queued work and adds up the device
// times it charged.
func (p *ProfiledBackend) gather() {
	for name, t := range p.timer.LaunchTimes() {
		p.add(name, t.Total, t.Launches)
	}
}

func (p *ProfiledBackend) add(kind string, d time.Duration, calls int64) {
	p.mu.Lock()
	p.total[kind] += d
	p.calls[kind] += calls
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

func (p *ProfiledBackend) MatMulDecode(dst, x, w Tensor, n int) {
	p.timed(OpMatMul, func() { p.inner.MatMulDecode(dst, x, w, n) })
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

// Sync also gathers the device times of a LaunchTimer.
func (p *ProfiledBackend) Sync() error {
	err := p.inner.Sync()
	if p.timing {
		p.gather()
	}
	return err
}

func (p *ProfiledBackend) Err() error   { return p.inner.Err() }
func (p *ProfiledBackend) Close() error { return p.inner.Close() }
