package cpu

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"
)

// TestPoolRuns drives the pool through many runs of every size, with gaps
// of every length between them (so helpers and caller are caught polling,
// parking and waking), and checks each run's result in full: a helper that
// missed a run, ran one twice or still worked on the previous one when the
// next began would leave bytes of the wrong run (and the race detector
// would see the overlap). It is also the test to run as several race-built
// copies at once, when the pool changes:
//
//	go test -race -c -o /tmp/cpu.test ./backend/cpu
//	for i in 1 2 3; do /tmp/cpu.test -test.run TestPoolRuns -test.count 20 & done; wait
func TestPoolRuns(t *testing.T) {
	runs := 3000
	if testing.Short() {
		runs = 500
	}
	for _, threads := range []int{2, 3, runtime.GOMAXPROCS(0) + 1} {
		t.Run(fmt.Sprintf("threads=%d", threads), func(t *testing.T) {
			b := New(threads)
			defer b.Close()
			rng := rand.New(rand.NewPCG(uint64(threads), 1))
			src := make([]byte, 1<<16)
			dst := make([]byte, 1<<16)
			for r := range runs {
				n := 1 + rng.IntN(len(src))
				if rng.IntN(4) == 0 {
					n = 1 + rng.IntN(3*threads) // fewer claims than threads
				}
				for i := range n {
					src[i] = byte(r + i*7)
				}
				b.pool.task = task{kind: kCopyBytes, total: n, grain: 1 + rng.IntN(n), w: src[:n], out: dst[:n]}
				b.pool.run()
				for i := range n {
					if dst[i] != src[i] {
						t.Fatalf("run %d (%d bytes, grain %d): byte %d is %d, want %d", r, n, b.pool.task.grain, i, dst[i], src[i])
					}
				}
				switch rng.IntN(8) {
				case 0:
					time.Sleep(time.Duration(rng.IntN(400)) * time.Microsecond) // past the polling
				case 1:
					runtime.Gosched()
				}
			}
		})
	}
}
