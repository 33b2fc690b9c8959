package cpu

import (
	"runtime"
	"sync/atomic"
	"time"

	"github.com/glint-llm/glint/dtype"
)

// kind selects the loop a task runs. A switch over plain data instead of a
// func value keeps dispatch free of closures, and so of allocations.
type kind int

const (
	kMatMul kind = iota
	kRMSNorm
	kLayerNorm
	kSiLUMul
	kGELUMul
	kSoftmax
	kAttention
	kQuantize
	kCopyBytes
	kInterleave
)

// task is the op in flight: its arguments and a shared cursor from which
// threads claim items in chunks of grain, so fast threads take more work and
// all stay busy until the end.
type task struct {
	kind  kind
	total int
	grain int
	next  atomic.Int64

	// Operands; which are set depends on kind.
	dst, x, y []float32
	z         []float32 // kLayerNorm: the bias (nil: none)
	w         []byte
	out       []byte // kCopyBytes, kInterleave: the destination of w
	wt        dtype.Type
	simd      simdLevel  // matmul kernels to use
	x8        bool       // kMatMul: w is Q4_0 interleaved in eights (interleave.go)
	sum       floatSum   // kMatMul with float weights: their summation order
	act       *acts      // quantised activations (quantised weights)
	at        dtype.Type // kQuantize: activation type
	off       int32      // kQuantize: correction offset (actOffset)
	n, k, m   int        // tokens, inner size (row length; kInterleave: its bytes), outer size (rows of w)
	eps       float32

	// Attention: the view's rows ([n, 4]) and cells ([cells, 3]) as in
	// backend.KVView, and the options of backend.Attn.
	q, kc, vc                        []float32
	kh, vh                           []uint16 // F16 caches (kc, vc are then nil)
	heads, kvHeads, headDim, qStride int
	rows, cells                      []int32
	batched                          uint64 // the sequences with more than one row
	window                           int
	scale, softCap                   float32
}

// pool runs a task on the caller plus threads-1 persistent goroutines. A
// Backend issues one op at a time, so one task slot suffices.
//
// A decode step is a few hundred ops, most of them a few tens of
// microseconds long. A helper that parks between them (a futex sleep) takes
// about 10 µs to wake on the 2-vCPU VMs here, which cost a 1B Q4_0 token
// about a millisecond in matmuls alone, and several sequences decoding
// together more again, since their small ops (norms, SiLU, copies) then
// split in two as well. So a helper first spins for a while on the run
// counter, as llama.cpp's threads poll, and parks only when no op came:
// between tokens, or for good once the backend is idle. It spins only where
// each thread has a CPU of its own; otherwise it would take the CPU from
// the thread it waits for.
type pool struct {
	b    *Backend
	task task
	// run is the current run's number (high bits) and how many helpers
	// (ids 1…) it wants (low runBits), in one word so that a helper reads
	// them together: a change tells spinning helpers that a task is set.
	run atomic.Uint64
	// pending is how many of the run's helpers have not finished it.
	pending atomic.Int32
	quit    atomic.Bool
	helpers []helper
	spin    time.Duration
	alive   bool
}

// helper is one worker goroutine's parking place.
type helper struct {
	// asleep is set while the helper parks (or is about to) on wake; the
	// run that clears it owes it a wake-up.
	asleep atomic.Bool
	wake   chan struct{}
	_      [64]byte // keeps the helpers' flags on their own cache lines
}

// spinFor is how long an idle helper polls before it parks: longer than
// the gaps between a step's ops, shorter than a human notices as load.
const spinFor = 200 * time.Microsecond

func (p *pool) start(b *Backend, threads int) {
	p.b = b
	p.alive = true
	if threads <= runtime.GOMAXPROCS(0) {
		p.spin = spinFor
	}
	p.helpers = make([]helper, threads-1)
	for i := range p.helpers {
		p.helpers[i].wake = make(chan struct{}, 1)
		go p.worker(i + 1)
	}
}

// runBits holds a run's helper count in pool.run's word.
const runBits = 16

// maxThreads is the most threads a backend runs on (New).
const maxThreads = 1 << (runBits - 1)

func (p *pool) worker(id int) {
	h := &p.helpers[id-1]
	var seen uint64
	for {
		seen = p.await(h, seen)
		if p.quit.Load() {
			return
		}
		// A run this helper is not part of may be followed by the next at
		// any time, so only a helper the run counts in touches the task.
		if id <= int(seen&(1<<runBits-1)) {
			p.b.work(&p.task, id)
			p.pending.Add(-1)
		}
	}
}

// await returns the run word once it has moved past seen: at first by
// polling it, then parked on h.wake.
func (p *pool) await(h *helper, seen uint64) uint64 {
	if p.spin > 0 {
		deadline := time.Now().Add(p.spin)
		for i := 1; ; i++ {
			if g := p.run.Load(); g != seen {
				return g
			}
			if i%256 == 0 {
				if time.Now().After(deadline) {
					break
				}
				runtime.Gosched() // whatever else wants this CPU, briefly
			}
		}
	}
	h.asleep.Store(true)
	if g := p.run.Load(); g != seen && h.asleep.CompareAndSwap(true, false) {
		return g // a run began as it lay down, and nobody owes it a wake-up
	}
	<-h.wake
	return p.run.Load()
}

// exec runs the current task on every thread and waits for it. The
// atomic run word orders the task's fields before the helpers read them;
// the pending count orders their results before the caller's next op.
func (p *pool) exec() {
	t := &p.task
	t.next.Store(0)
	if t.grain < 1 {
		t.grain = 1
	}
	// Waking threads that would find nothing to do only costs latency.
	helpers := min(len(p.helpers), t.claims()-1)
	p.pending.Store(int32(helpers))
	p.run.Store((p.run.Load()>>runBits+1)<<runBits | uint64(helpers))
	for i := range helpers {
		if h := &p.helpers[i]; h.asleep.CompareAndSwap(true, false) {
			h.wake <- struct{}{}
		}
	}
	p.b.work(t, 0)
	for i := 1; p.pending.Load() != 0; i++ {
		if i%64 == 0 {
			runtime.Gosched() // a helper may need this CPU to finish
		}
	}
}

func (p *pool) stop() {
	if !p.alive {
		return
	}
	p.alive = false
	p.quit.Store(true)
	p.run.Add(1 << runBits)
	for i := range p.helpers {
		close(p.helpers[i].wake)
	}
}

// grainFor splits total items into about four chunks per thread, enough to
// even out threads that are slowed down by others on the machine.
func (b *Backend) grainFor(total int) int {
	g := total / (4 * b.threads)
	return max(g, 1)
}

// span is the items of claim c (claims are numbered from 0), clipped to
// t.total.
func (t *task) span(c int) (lo, hi int) {
	lo = c * t.grain
	return lo, min(lo+t.grain, t.total)
}

// claims is the number of claims with items in them.
func (t *task) claims() int {
	return (t.total + t.grain - 1) / t.grain
}

// work claims chunks of the task until none are left.
func (b *Backend) work(t *task, id int) {
	for {
		lo, hi := t.span(int(t.next.Add(1) - 1))
		if lo >= t.total {
			return
		}
		switch t.kind {
		case kMatMul:
			matMulRows(t, lo, hi)
		case kRMSNorm:
			rmsNormRows(t, lo, hi)
		case kLayerNorm:
			layerNormRows(t, lo, hi)
		case kSiLUMul:
			siluMulRange(t, lo, hi)
		case kGELUMul:
			geluMulRange(t, lo, hi)
		case kSoftmax:
			softmaxRows(t, lo, hi)
		case kAttention:
			b.attentionItems(t, id, lo, hi)
		case kQuantize:
			quantizeRows(t, lo, hi)
		case kCopyBytes:
			copy(t.out[lo:hi], t.w[lo:hi])
		case kInterleave:
			interleaveQ4_0(t.out, t.w, t.k, lo, hi)
		}
	}
}
