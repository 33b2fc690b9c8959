package grammar

import (
	"runtime"
	"syscall"
	"time"
)

// threadCPU is the CPU time of the calling thread (RUSAGE_THREAD): on a
// shared machine a benchmark's wall time counts other processes' turns.
func threadCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(1, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func lockThread() func() {
	runtime.LockOSThread()
	return runtime.UnlockOSThread
}
