package opencl

import (
	"testing"

	"github.com/glint-llm/glint/backend"
	"github.com/glint-llm/glint/backend/backendtest"
)

// Top-level names so that -bench MatMul or -bench Ops selects a half.

func benchBackend(b *testing.B) backend.Backend {
	be, err := New(Options{})
	if err != nil {
		b.Skipf("no OpenCL device: %v", err)
	}
	return be
}

func BenchmarkMatMul(b *testing.B) { backendtest.BenchMatMul(b, benchBackend) }

func BenchmarkOps(b *testing.B) { backendtest.BenchOps(b, benchBackend) }
