//go:build unix

package pages

import "syscall"

func dontNeed(b []byte) { _ = syscall.Madvise(b, syscall.MADV_DONTNEED) }
