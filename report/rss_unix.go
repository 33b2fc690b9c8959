//go:build unix

package report

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
	"syscall"
)

// peakRSS is this process's peak resident set in bytes: VmHWM where /proc
// has it (Linux), else getrusage's ru_maxrss.
func peakRSS() int64 {
	if v := vmHWM(); v > 0 {
		return v
	}
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return maxrssBytes(int64(ru.Maxrss))
}

// childPeakRSS reads a finished child's ru_maxrss, the fallback when the
// child could not report its own.
func childPeakRSS(ps *os.ProcessState) int64 {
	if ps == nil {
		return 0
	}
	if ru, ok := ps.SysUsage().(*syscall.Rusage); ok {
		return maxrssBytes(int64(ru.Maxrss))
	}
	return 0
}

func vmHWM() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := bytes.Fields(sc.Bytes())
		if len(f) == 3 && string(f[0]) == "VmHWM:" && string(f[2]) == "kB" {
			v, err := strconv.ParseInt(string(f[1]), 10, 64)
			if err != nil {
				return 0
			}
			return v << 10
		}
	}
	return 0
}
