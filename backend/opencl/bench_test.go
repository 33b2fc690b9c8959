package opencl

import (
	"fmt"
	"testing"

	"github.com/glint-llm/glint/backend"
	"github.com/glint-llm/glint/backend/backendtest"
	"github.com/glint-llm/glint/dtype"
)

// Top-level names so that -bench MatMul or -bench Ops selects a half.

func benchBackend(b *testing.B) backend.Backend {
	be, err := New(Options{Numerics: testNumerics})
	if err != nil {
		b.Skipf("no OpenCL device: %v", err)
	}
	return be
}

func BenchmarkMatMul(b *testing.B) { backendtest.BenchMatMul(b, benchBackend) }

func BenchmarkOps(b *testing.B) { backendtest.BenchOps(b, benchBackend) }

// BenchmarkFusedDecode times a Llama-3.2-1B layer's decode step (attention
// aside, fuse_test.go's fusedStep) fused and op by op, so that a fused
// kernel that costs more than the launches it saves shows on any device.
func BenchmarkFusedDecode(b *testing.B) {
	for _, dt := range []dtype.Type{dtype.Q4_0, dtype.Q4_K, dtype.Q8_0} {
		for _, fuse := range []bool{true, false} {
			name := fmt.Sprintf("%v/fused=%v", dt, fuse)
			b.Run(name, func(b *testing.B) {
				be, err := New(Options{Numerics: testNumerics})
				if err != nil {
					b.Skipf("no OpenCL device: %v", err)
				}
				defer be.Close()
				be.fuse = fuse
				s := newFusedStep(b, be, 1, dt, dt, 2048, 2048, 512, 8192, 64, dtype.F16,
					backend.Rope{Dims: 64, Theta: 500000})
				s.run(be)
				if err := be.Sync(); err != nil {
					b.Fatal(err)
				}
				b.ResetTimer()
				for range b.N {
					s.run(be)
					if err := be.Sync(); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
