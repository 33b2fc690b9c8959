package cpu

import (
	"syscall"
	"unsafe"
)

// threadCPU is the calling OS thread's CPU time in ns (CLOCK_THREAD_CPUTIME_ID),
// which other processes on a shared machine disturb far less than wall time.
func threadCPU() (int64, bool) {
	var ts syscall.Timespec
	const clockThreadCPUTimeID = 3
	_, _, e := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clockThreadCPUTimeID, uintptr(unsafe.Pointer(&ts)), 0)
	return ts.Nano(), e == 0
}
