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

// ownWeight replaces t.data with a backend-owned copy in the same layout:
// weights of a huge page or more go to aligned anonymous memory, smaller
// ones (norms, tiny test weights: nothing to gain from huge pages) to the Go
// heap. A copy in an interleaved layout (4 rows' blocks side by side, one
// linear stream per thread) was measured too: slower than this one at every
// Llama 3.2 1B shape, so rows keep the file's layout and every kernel, the
// prefill and Embedding ones included, reads the copy.
func (b *Backend) ownWeight(t *Tensor) error {
	n := len(t.data)
	if n < hugePage {
		t.data = append([]byte(nil), t.data...)
		return nil
	}
	m, err := mapAnon(n)
	if err != nil {
		return fmt.Errorf("copying %d bytes: %w", n, err)
	}
	// Faulting in and zeroing the fresh pages is most of the copy's cost,
	// and it parallelises.
	b.pool.task = task{kind: kCopyBytes, total: n, grain: hugePage, w: t.data, out: m.data}
	b.pool.run()
	t.data, t.mem = m.data, m
	b.owned = append(b.owned, m)
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
