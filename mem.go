package glint

import (
	"bufio"
	"os"
	"strconv"
	"strings"
)

// availableMemory is the host memory a new allocation can take without
// swapping (Linux's MemAvailable), or 0 where it is not known: a CPU KV
// cache larger than it is refused with its size rather than left to fail
// when the allocation is made.
func availableMemory() int64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) >= 2 && fields[0] == "MemAvailable:" {
			kb, err := strconv.ParseInt(fields[1], 10, 64)
			if err != nil {
				return 0
			}
			return kb << 10
		}
	}
	return 0
}
