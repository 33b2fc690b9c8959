package cpu

import (
	"testing"

	"github.com/glint-llm/glint/backend"
	"github.com/glint-llm/glint/backend/backendtest"
)

// The shared benchmarks, split into two top-level functions so that
// -bench MatMul selects the matmuls alone; together they are
// backendtest.Bench. All CPUs are used.

func newBench(*testing.B) backend.Backend { return New(0) }

func BenchmarkMatMul(b *testing.B) { backendtest.BenchMatMul(b, newBench) }

func BenchmarkOps(b *testing.B) { backendtest.BenchOps(b, newBench) }

func BenchmarkLayers(b *testing.B) { backendtest.BenchLayers(b, newBench) }
