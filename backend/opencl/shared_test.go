package opencl

import (
	"strings"
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
	requireDevice(t)
	sharedOnce.Do(func() { sharedB, sharedErr = New(Options{}) })
	if sharedErr != nil {
		t.Fatalf("opencl.New: %v", sharedErr)
	}
	if err := sharedB.Err(); err != nil {
		t.Fatalf("shared backend failed earlier: %v", err)
	}
	return sharedB
}

// requireDevice skips a test, with a one-line reason, where OpenCL or any
// device of it is absent (no loader, no ICD, no device): go test ./... passes
// on a machine without OpenCL.
func requireDevice(t testing.TB) []DeviceInfo {
	t.Helper()
	ds, err := Devices()
	if err != nil {
		t.Skipf("no OpenCL device: %s", strings.SplitN(err.Error(), "\n", 2)[0])
	}
	return ds
}
