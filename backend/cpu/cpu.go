// Package cpu is glint's host backend: every backend op in portable Go, run on
// a persistent pool of worker goroutines, with C kernels for x86 (simd.c,
// ops.c, through cgo) chosen at run time by instruction set: AVX2,
// AVX-512, AVX-512 VNNI and VBMI (int8 dot products).
// Options.Numerics (numerics.Options) caps the level, which is how the
// tests compare every path on one machine, and picks the llama.cpp build
// whose arithmetic it reproduces (flavor.go). |avx2|avx512|avx512vnni|avx512vbmi caps the level, which
// is how the tests compare every path on one machine. Weights stay in their stored type and are unpacked block
// by block inside the dot kernels; activations are rounded as llama.cpp
// rounds them: to Q8_0/Q8_K for quantised weights, so that block dot
// products are exact integers, and to F16/BF16 for F16/BF16 weights. Every
// level gives the portable Go path's bits (DEVELOPERS.md, "Numerics").
//
// Memory: the matmul weights (every type but F32 and I32) are copied at load,
// in their stored layout, into backend-owned, 2 MiB-aligned anonymous memory
// advised for transparent huge pages, which decode streams faster than the
// caller's mmap'd file (weights.go). The cost: the weights' size again in
// private memory, on top of the file pages, which are read once by the copy
// and then left to the page cache (clean, so reclaimable, but counted in the
// resident set until reclaimed). Peak RSS roughly doubles (about 1.5 GB
// for 1B Llama Q4_0, a 767 MB file). The copy runs on all threads, but it
// moves every file read (and any disk read) that first use would do into
// load, which takes about a second for a 1B model (more for F16 from disk),
// while TTFT shrinks. Free and Close release the copies.
//
// A Backend is not safe for concurrent use: one goroutine issues ops, and the
// backend spreads each op over its threads. Steady-state ops allocate nothing.
package cpu

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"

	"github.com/glint-llm/glint/backend"
	"github.com/glint-llm/glint/dtype"
	"github.com/glint-llm/glint/numerics"
)

// Backend is the CPU implementation of backend.Backend.
type Backend struct {
	threads int
	device  string
	simd    simdLevel
	flavour numerics.Flavour
	dbg     int
	pool    pool
	err     error
	closed  bool

	// Per-thread scratch, grown on demand and then reused, so that ops stay
	// allocation-free once the largest shapes have been seen.
	scratch []scratch
	// flash is the per-thread working memory of flash attention (flash.go).
	flash []flashScratch
	// ropeCS holds cos/sin of one token's rotation angles.
	ropeCS []float32
	// rowBuf holds one weight row gathered from an interleaved weight (row).
	rowBuf []byte

	// act holds the last quantised activations and actKey what they are
	// (see quant.go); clock numbers tensor writes for actKey.version.
	act    acts
	actKey actKey
	clock  uint64
	// quantized counts activation quantisations (tests check the reuse).
	quantized int

	// owned lists the weight copies in anonymous memory (weights.go), which
	// Close releases.
	owned []*mapping
}

// scratch is one thread's working memory.
type scratch struct {
	scores []float32
	// row holds two head rows (the query, a cache row) for the portable
	// attention.
	row []float32
	// runs holds the cells row runsRow of the attention in flight sees
	// (visible).
	runs    []int32
	runsRow int
	// acc holds the C attention kernels' p·V lane sums (attnAccFloats).
	acc []float32
	// pad keeps neighbouring threads' headers on different cache lines.
	_ [24]byte
}

var _ backend.Backend = (*Backend)(nil)

// Options say how a Backend runs.
type Options struct {
	// Threads is the number of threads ops run on (0 or less:
	// runtime.NumCPU(); at most maxThreads).
	Threads int
	// Numerics chooses the kernel level and the llama.cpp build whose
	// arithmetic the backend reproduces (the zero value: the host's best
	// level and native build).
	Numerics numerics.Options
}

// New starts a backend of threads threads (0 or less: runtime.NumCPU())
// at the host's best kernel level, in the arithmetic of the llama.cpp
// build native to the host: NewWith(Options{Threads: threads}), which
// cannot fail.
func New(threads int) *Backend {
	b, err := NewWith(Options{Threads: threads})
	if err != nil {
		panic(err) // unreachable: empty Numerics resolve on any host
	}
	return b
}

// NewWith starts a backend with o.Threads threads. The calling goroutine is
// one of them: threads-1 worker goroutines are started here and live until
// Close.
func NewWith(o Options) (*Backend, error) {
	ns, err := o.Numerics.Resolve(numerics.HostCPU())
	if err != nil {
		return nil, fmt.Errorf("cpu: %w", err)
	}
	threads := o.Threads
	if threads <= 0 {
		threads = runtime.NumCPU()
	}
	threads = min(threads, maxThreads)
	b := &Backend{
		threads: threads,
		simd:    ns.Level,
		flavour: ns.Flavour,
		device:  cpuModel(),
		scratch: make([]scratch, threads),
	}
	b.pool.start(b, threads)
	return b, nil
}

// Threads is the number of threads ops run on.
func (b *Backend) Threads() int { return b.threads }

// Name implements backend.Backend.
func (b *Backend) Name() string { return "cpu" }

// Device implements backend.Backend: the CPU model, the thread count, the
// matmul kernels in use and the llama.cpp build whose arithmetic they give.
func (b *Backend) Device() string {
	return fmt.Sprintf("%s, %d threads, %v kernels, llama.cpp %v arithmetic", b.device, b.threads, b.simd, b.flavour)
}

// Sync implements backend.Backend. CPU ops are synchronous, so it only
// reports the sticky error.
func (b *Backend) Sync() error { return b.err }

// Err implements backend.Backend.
func (b *Backend) Err() error { return b.err }

// Close stops the worker goroutines and releases the weight copies.
// Tensors become unusable; other memory is the garbage collector's.
// Closing twice is harmless.
func (b *Backend) Close() error {
	if b.closed {
		return nil
	}
	b.closed = true
	b.pool.stop()
	b.releaseAll()
	return nil
}

// fail records err as the backend's error unless one is already recorded.
func (b *Backend) fail(err error) {
	if b.err == nil {
		b.err = err
	}
}

// ok reports whether an op may run; after a failure every op is a no-op.
func (b *Backend) ok(op string) bool {
	if b.err != nil {
		return false
	}
	if b.closed {
		b.err = fmt.Errorf("cpu: %s: %w", op, errClosed)
		return false
	}
	return true
}

var (
	errClosed  = errors.New("backend closed")
	errFreed   = errors.New("tensor freed")
	errForeign = errors.New("tensor belongs to another backend")
)

// tensor resolves an op argument to one of this backend's live tensors of
// type dt, recording an error naming the op and argument otherwise.
func (b *Backend) tensor(op, arg string, t backend.Tensor, dt dtype.Type) *Tensor {
	ct, err := b.own(op, arg, t)
	if err != nil {
		b.fail(err)
		return nil
	}
	if ct.dt != dt {
		b.fail(backend.ShapeError("cpu: "+op, "%s is %v, want %v", arg, ct.dt, dt))
		return nil
	}
	return ct
}

// own checks that t is a live tensor of this backend.
func (b *Backend) own(op, arg string, t backend.Tensor) (*Tensor, error) {
	ct, ok := t.(*Tensor)
	if !ok || ct == nil {
		if t == nil || ok {
			return nil, backend.ShapeError("cpu: "+op, "%s is nil", arg)
		}
		return nil, fmt.Errorf("cpu: %s: %s: %w (%T)", op, arg, errForeign, t)
	}
	if ct.b != b {
		return nil, fmt.Errorf("cpu: %s: %s: %w", op, arg, errForeign)
	}
	if ct.freed {
		return nil, fmt.Errorf("cpu: %s: %s %q: %w", op, arg, ct.name, errFreed)
	}
	return ct, nil
}

// writable records an error when dst is a weight: weights usually live in
// read-only mmap'd memory. Every op calls it for each tensor it writes, so
// it is also where the write is recorded (wrote).
func (b *Backend) writable(op, arg string, t *Tensor) bool {
	if t.weight {
		b.fail(fmt.Errorf("cpu: %s: %s is the read-only weight %q", op, arg, t.name))
		return false
	}
	b.wrote(t)
	return true
}

// wrote gives t a new version: anything derived from its contents (the
// quantised activations) is stale from now on.
func (b *Backend) wrote(t *Tensor) {
	b.clock++
	t.version = b.clock
}

// checkN records an error unless 0 <= n <= rows of every tensor given.
func (b *Backend) checkN(op string, n int, ts ...*Tensor) bool {
	if n < 0 {
		b.fail(backend.ShapeError("cpu: "+op, "n = %d is negative", n))
		return false
	}
	for _, t := range ts {
		if r := backend.Rows(t); n > r {
			b.fail(backend.ShapeError("cpu: "+op, "n = %d exceeds the %d rows of %v tensor %v", n, r, t.dt, t.shape))
			return false
		}
	}
	return true
}

// cpuModel reads the processor name the way lscpu does, falling back to the
// architecture when /proc/cpuinfo is unavailable.
func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err == nil {
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			k, v, found := strings.Cut(sc.Text(), ":")
			if !found {
				continue
			}
			switch strings.TrimSpace(k) {
			case "model name", "Processor", "cpu model":
				if v = strings.TrimSpace(v); v != "" {
					return v
				}
			}
		}
	}
	return runtime.GOARCH + " CPU"
}
