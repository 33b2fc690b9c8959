// Package cltest runs model-level tests on every OpenCL device present, so
// that two OpenCL compilers (PoCL's and Mesa rusticl's, on a machine
// without a GPU) build and check every kernel. GLINT_OPENCL_DEVICES selects
// the devices: "all" (the default) or a comma-separated list of selectors
// as opencl.SelectDevices takes them ("pocl,llvmpipe", "0").
//
// Importing it sets RUSTICL_ENABLE=llvmpipe where RUSTICL_ENABLE is unset
// (rusticl offers no device otherwise), and has OpenCL open the library
// GLINT_OPENCL_LIB names, as the generate command does. Only tests import
// it.
package cltest

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/glint-llm/glint/backend/opencl"
	"github.com/glint-llm/glint/backend/opencl/cl"
)

func init() {
	if _, ok := os.LookupEnv("RUSTICL_ENABLE"); !ok {
		os.Setenv("RUSTICL_ENABLE", "llvmpipe")
	}
	cl.SetLibrary(os.Getenv(cl.LibEnv))
}

// Devices returns the selected devices. It skips t, with a one-line
// reason, where there is no OpenCL device, and fails it where
// GLINT_OPENCL_DEVICES names none.
func Devices(t testing.TB) []opencl.DeviceInfo {
	t.Helper()
	if _, err := opencl.Devices(); err != nil {
		t.Skipf("no OpenCL device (.ci/deps.sh installs PoCL and rusticl): %s", strings.SplitN(err.Error(), "\n", 2)[0])
	}
	ds, err := opencl.SelectDevices(os.Getenv("GLINT_OPENCL_DEVICES"))
	if err != nil {
		t.Fatalf("GLINT_OPENCL_DEVICES: %v", err)
	}
	return ds
}

// Run runs f as one subtest per selected device, named by its ShortName.
func Run(t *testing.T, f func(t *testing.T, d opencl.DeviceInfo)) {
	t.Helper()
	for _, d := range Devices(t) {
		t.Run(d.ShortName(), func(t *testing.T) { f(t, d) })
	}
}

// New opens a Backend on d, closed when t ends.
func New(t testing.TB, d opencl.DeviceInfo) *opencl.Backend {
	t.Helper()
	b, err := opencl.New(opencl.Options{Device: strconv.Itoa(d.Index)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// NeedMemory skips t where d has less than bytes of global memory
// (llvmpipe offers 2 GiB).
func NeedMemory(t testing.TB, d opencl.DeviceInfo, bytes int64) {
	t.Helper()
	if d.GlobalMem < bytes {
		t.Skipf("%s has %d MiB of global memory; this test needs %d MiB", d.Name, d.GlobalMem>>20, bytes>>20)
	}
}

// Trim reports whether d is a second opinion: any selected device but the
// first. A slow test runs a shorter version of itself there (fewer steps,
// one cache type), so that a second compiler checks every kernel without
// doubling the test's time (llvmpipe launches kernels some 30× slower than
// PoCL).
func Trim(t testing.TB, d opencl.DeviceInfo) bool {
	t.Helper()
	return Devices(t)[0].Index != d.Index
}
