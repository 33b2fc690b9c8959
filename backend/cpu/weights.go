package cpu

import (
	"fmt"
	"unsafe"
)

// Why weights are copied: decode streams every matmul weight once per token,
// so it runs at the speed memory delivers them. Read straight from the
// caller's mmap'd file they arrive noticeably slower (4 KiB file pages: one
// TLB miss per page, and page-cache pages scattered in physical memory)
// than from a private, 2 MiB-aligned anonymous copy that the kernel backs
// with transparent huge pages. The cost is memory: each copied weight
// occupies its size again for the backend's lifetime. The original is
// never read after the copy, so its file pages are clean page cache that
// the OS may reclaim under pressure, but until it does they count in the
// process's resident set, which therefore roughly doubles for a quantised
// model (see the package documentation).

// ownWeight replaces t.data with a backend-owned copy: weights of a huge
// page or more go to aligned anonymous memory, smaller ones (norms, tiny
// test weights: nothing to gain from huge pages) to the Go heap. Rows keep
// the file's layout, which every kernel, the prefill and Embedding ones
// included, reads, except Q4_0 on the AVX2 levels (interleave.go). (Blocks
// of 4 rows side by side, for one linear stream per thread, were measured
// too: slower at every Llama 3.2 1B shape with the file layout's kernels.)
func (b *Backend) ownWeight(t *Tensor) error {
	n := len(t.data)
	var out []byte
	if n < hugePage {
		out = make([]byte, n)
	} else {
		m, err := mapAnon(n)
		if err != nil {
			return fmt.Errorf("copying %d bytes: %w", n, err)
		}
		out, t.mem = m.data, m
		b.owned = append(b.owned, m)
	}
	// Faulting in and zeroing the fresh pages is most of the copy's cost,
	// and it parallelises.
	if interleavesQ4_0(b.simd, t.dt, t.shape) {
		rowBytes, _ := t.dt.RowBytes(t.shape[1])
		b.pool.task = task{kind: kInterleave, total: t.shape[0] / q4x8Rows,
			grain: max(1, hugePage/(q4x8Rows*rowBytes)), w: t.data, out: out, k: rowBytes}
		t.x8 = true
	} else {
		b.pool.task = task{kind: kCopyBytes, total: n, grain: hugePage, w: t.data, out: out}
	}
	b.pool.run()
	t.data = out
	return nil
}

// release returns one copy's memory to the OS.
func (b *Backend) release(m *mapping) {
	if err := m.unmap(); err != nil {
		b.fail(fmt.Errorf("cpu: releasing weight memory: %w", err))
	}
}

// releaseAll releases every copy not yet freed (Close).
func (b *Backend) releaseAll() {
	for _, m := range b.owned {
		b.release(m)
	}
	b.owned = nil
}

func addrOf(p []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(p))) }
