package cpu

import (
	"sync"
	"sync/atomic"

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
type pool struct {
	b     *Backend
	task  task
	wake  []chan struct{}
	done  sync.WaitGroup
	alive bool
}

func (p *pool) start(b *Backend, threads int) {
	p.b = b
	p.alive = true
	p.wake = make([]chan struct{}, threads-1)
	for i := range p.wake {
		p.wake[i] = make(chan struct{})
		go p.worker(i+1, p.wake[i])
	}
}

func (p *pool) worker(id int, wake chan struct{}) {
	for range wake {
		p.b.work(&p.task, id)
		p.done.Done()
	}
}

// run executes the current task on every thread and waits for it. The
// channel send orders the task's fields before the workers read them;
// WaitGroup.Wait orders their results before the caller's next op.
func (p *pool) run() {
	t := &p.task
	t.next.Store(0)
	if t.grain < 1 {
		t.grain = 1
	}
	// Waking threads that would find nothing to do only costs latency.
	helpers := min(len(p.wake), t.claims()-1)
	p.done.Add(helpers)
	for i := range helpers {
		p.wake[i] <- struct{}{}
	}
	p.b.work(t, 0)
	p.done.Wait()
}

func (p *pool) stop() {
	if !p.alive {
		return
	}
	p.alive = false
	for _, c := range p.wake {
		close(c)
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
