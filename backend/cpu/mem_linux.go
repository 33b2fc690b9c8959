//go:build linux

package cpu

import (
	"fmt"
	"syscall"
)

// hugePage is the size of an x86-64 transparent huge page; a 2 MiB-aligned
// copy lets the kernel back it with huge pages, so streaming a weight costs
// one TLB entry per 2 MiB instead of one per 4 KiB.
const hugePage = 2 << 20

// mapping is anonymous memory owned by the backend: data is the usable,
// hugePage-aligned part of raw, which is what munmap needs back.
type mapping struct {
	raw  []byte
	data []byte
}

// mapAnon returns n bytes of zeroed anonymous memory starting on a huge-page
// boundary, advised for huge pages. The slack before and after the aligned
// range is reserved address space only: it is never touched, so never backed.
func mapAnon(n int) (*mapping, error) {
	raw, err := syscall.Mmap(-1, 0, n+hugePage, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
	if err != nil {
		return nil, fmt.Errorf("mmap %d bytes: %w", n+hugePage, err)
	}
	off := 0
	if r := addrOf(raw) % hugePage; r != 0 {
		off = int(hugePage - r)
	}
	data := raw[off : off+n : off+n]
	// Only a hint: without transparent huge pages the copy still works.
	_ = syscall.Madvise(data, syscall.MADV_HUGEPAGE)
	return &mapping{raw: raw, data: data}, nil
}

func (m *mapping) unmap() error {
	if m.raw == nil {
		return nil
	}
	err := syscall.Munmap(m.raw)
	m.raw, m.data = nil, nil
	return err
}
