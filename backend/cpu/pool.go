package cpu

import (
	"runtime"
	"sync/atomic"
	"time"

	"github.com/glint-llm/glint/dtype"
	"github.com/glint-llm/glint/numerics"
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
	kAttention
	kQuantize
	kCopyBytes
	kInterleave
	kFunc // fn: ops of their own file (flash attention, cache copies)
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
	xh        []uint16  // kMatMul with F16 weights: x's F16 bits (nil: none)
	z         []float32 // kLayerNorm: the bias (nil: none)
	w         []byte
	out       []byte // kCopyBytes, kInterleave: the destination of w
	wt        dtype.Type
	simd      simdLevel        // matmul kernels to use
	flavour   numerics.Flavour // kSiLUMul: the llama.cpp build whose exp it takes
	x8        bool             // kMatMul: w is Q4_0 interleaved in eights (interleave.go)
	decode    bool             // kMatMul: every row in a lone row's arithmetic (MatMulDecode)
	sum       floatSum         // kMatMul with float weights: their summation order
	act       *acts            // quantised activations (quantised weights)
	at        dtype.Type       // kQuantize: activation type
	off       int32            // kQuantize: correction offset (actOffset)
	n, k, m   int              // tokens, inner size (row length; kInterleave: its bytes), outer size (rows of w)
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

	// kFunc: a top-level function (no closure, so no allocation) and its
	// operands.
	fn func(b *Backend, t *task, id, lo, hi int)
	fa *flashTask
	cc *cacheCopy
}

// pool runs a task on the caller plus threads-1 persistent goroutines. A
// Backend issues one op at a time, so one task slot suffices.
//
// A decode step is a few hundred ops, most a few tens of microseconds long.
// A goroutine parked between them (a futex sleep) takes about 10 µs to wake
// on the 2-vCPU VMs here, a millisecond of a 1B Q4_0 token. So, where each
// thread has a CPU of its own, the helpers poll the run word for a while
// before they park, as llama.cpp's threads do, and the caller polls the
// pending count before it parks; otherwise polling would take the CPU from
// the very thread it waits for.
//
// Every wait is a loop over the word it waits on, so a wake-up that comes
// late (one owed by an earlier run) costs a turn of the loop and never ends
// a wait early. A parker's token is owed exactly when its asleep flag is
// cleared by someone else, and the sleeper takes it before it sets the flag
// again, so a buffer of one never fills.
type pool struct {
	b    *Backend
	task task
	// word is the run's number (high bits) and how many helpers (ids 1…)
	// take part (low runBits): one word, so a helper reads both together
	// and one outside the run never touches the task the next run rewrites.
	word atomic.Uint64
	// pending counts the run's helpers that have not finished it.
	pending atomic.Int64
	quit    atomic.Bool
	caller  parker
	helpers []parker
	spin    time.Duration
	alive   bool
}

// parker is a goroutine's parking place.
type parker struct {
	// asleep is set while its goroutine parks (or is about to); whoever
	// clears it owes that goroutine a token on wake.
	asleep atomic.Bool
	wake   chan struct{}
	_      [64]byte // keeps the flags on cache lines of their own
}

// spinFor is how long a waiting goroutine polls before it parks: longer
// than the gaps between a step's ops, shorter than anyone notices as load.
const spinFor = 200 * time.Microsecond

// runBits holds a run's helper count in pool.word.
const runBits = 16

// maxThreads is the most threads a backend runs on (New).
const maxThreads = 1 << (runBits - 1)

func (p *pool) start(b *Backend, threads int) {
	p.b = b
	p.alive = true
	if threads <= runtime.GOMAXPROCS(0) {
		p.spin = spinFor
	}
	p.caller.wake = make(chan struct{}, 1)
	p.helpers = make([]parker, threads-1)
	for i := range p.helpers {
		p.helpers[i].wake = make(chan struct{}, 1)
		go p.worker(i + 1)
	}
}

func (p *pool) worker(id int) {
	h := &p.helpers[id-1]
	var seen uint64
	for {
		p.wait(h, func() bool { return p.word.Load() != seen })
		seen = p.word.Load()
		if p.quit.Load() {
			return
		}
		if id > int(seen&(1<<runBits-1)) {
			continue // not part of this run
		}
		p.b.work(&p.task, id)
		if p.pending.Add(-1) == 0 {
			p.caller.notify()
		}
	}
}

// wait returns once ready does: at first by polling it, then parked.
func (p *pool) wait(w *parker, ready func() bool) {
	if p.spin > 0 {
		deadline := time.Now().Add(p.spin)
		for i := 1; !ready(); i++ {
			if i%256 == 0 {
				if time.Now().After(deadline) {
					break
				}
				runtime.Gosched() // whatever else wants this CPU, briefly
			}
		}
	}
	for !ready() {
		w.asleep.Store(true)
		if ready() && w.asleep.CompareAndSwap(true, false) {
			return // nobody cleared the flag, so nobody owes a token
		}
		<-w.wake
	}
}

// notify wakes w's goroutine if it parks, or is about to.
func (w *parker) notify() {
	if w.asleep.CompareAndSwap(true, false) {
		w.wake <- struct{}{}
	}
}

// run executes the current task on every thread and waits for it. The run
// word orders the task's fields before the helpers read them; the pending
// count orders their results before the caller's next op.
func (p *pool) run() {
	t := &p.task
	t.next.Store(0)
	if t.grain < 1 {
		t.grain = 1
	}
	// Waking threads that would find nothing to do only costs latency.
	helpers := min(len(p.helpers), t.claims()-1)
	if helpers > 0 {
		p.pending.Store(int64(helpers))
		p.word.Store((p.word.Load()>>runBits+1)<<runBits | uint64(helpers))
		for i := range helpers {
			p.helpers[i].notify()
		}
	}
	p.b.work(t, 0)
	if helpers > 0 {
		p.wait(&p.caller, func() bool { return p.pending.Load() == 0 })
	}
}

func (p *pool) stop() {
	if !p.alive {
		return
	}
	p.alive = false
	p.quit.Store(true)
	p.word.Add(1 << runBits)
	for i := range p.helpers {
		p.helpers[i].notify()
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
	if t.kind == kMatMul && simdRows(t) {
		return // the kernels claimed the chunks themselves
	}
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
		case kAttention:
			b.attentionItems(t, id, lo, hi)
		case kQuantize:
			quantizeRows(t, lo, hi)
		case kCopyBytes:
			copy(t.out[lo:hi], t.w[lo:hi])
		case kInterleave:
			interleaveQ4_0(t.out, t.w, t.k, lo, hi)
		case kFunc:
			t.fn(b, t, id, lo, hi)
		}
	}
}
