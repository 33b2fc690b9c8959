//go:build cgo && amd64

package cpu

import (
	"testing"

	"github.com/glint-llm/glint/dtype"
)

// TestAMXDeclines: the AMX kernel sums block terms in double, which is not
// the order of Q4_0's or Q8_0's reference (quant.go), so it must decline
// both, leaving them to the kernels TestMatMulLevelsBitExact checks.
func TestAMXDeclines(t *testing.T) {
	for _, dt := range []dtype.Type{dtype.Q4_0, dtype.Q8_0} {
		if amxMatMat(&task{wt: dt, n: 64, k: 64, m: 32}, 36, 0, 32) {
			t.Fatalf("the AMX kernel took %v", dt)
		}
	}
}
