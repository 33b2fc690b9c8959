package opencl

import (
	"sync"
	"testing"
)

// One Backend serves the whole test binary: building the program on PoCL
// takes seconds, and the backend is reused exactly as a model reuses it.
var (
	sharedOnce sync.Once
	sharedB    *Backend
	sharedErr  error
)

func testBackend(t testing.TB) *Backend {
	t.Helper()
	sharedOnce.Do(func() { sharedB, sharedErr = New(Options{}) })
	if sharedErr != nil {
		t.Fatalf("opencl.New: %v", sharedErr)
	}
	if err := sharedB.Err(); err != nil {
		t.Fatalf("shared backend failed earlier: %v", err)
	}
	return sharedB
}
