// Package pages releases parts of a read-only file mapping from the
// process's resident memory once a backend has copied them, so that loading
// a model costs its size once, not twice (the mapped file and the backend's
// copy). The mapping stays valid: released pages are read back from the
// file if touched again.
package pages

import (
	"os"
	"unsafe"
)

// Release drops the whole pages of part, which must lie inside mapping, a
// read-only file mapping. Never call it on anonymous or heap memory: there
// dropping a page loses its contents.
func Release(mapping, part []byte) {
	if len(part) == 0 || len(mapping) == 0 {
		return
	}
	base := uintptr(unsafe.Pointer(unsafe.SliceData(mapping)))
	start := uintptr(unsafe.Pointer(unsafe.SliceData(part))) - base
	end := start + uintptr(len(part))
	if end > uintptr(len(mapping)) {
		return
	}
	ps := uintptr(os.Getpagesize())
	start = (start + ps - 1) &^ (ps - 1) // mappings start on a page
	end &^= ps - 1
	if start < end {
		dontNeed(mapping[start:end])
	}
}
