package opencl

import (
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/glint-llm/glint/backend/cpu"
	"github.com/glint-llm/glint/backend/opencl/cl"
	"github.com/glint-llm/glint/numerics"
)

// testNumerics is what the tests' backends, OpenCL and the CPU reference
// alike, reproduce: the host's native build, or GLINT_GGML_FLAVOR's
// (numerics.FromEnv).
var testNumerics = numerics.FromEnv()

// testFlavour is testNumerics' flavour, for open.
var testFlavour = func() numerics.Flavour {
	f, err := numerics.ParseFlavour(testNumerics.Flavour, numerics.HostCPU())
	if err != nil {
		panic(err)
	}
	return f
}()

// newCPU is the CPU backend the tests compare with, in testNumerics.
func newCPU() *cpu.Backend {
	c, err := cpu.NewWith(cpu.Options{Threads: 2, Numerics: testNumerics})
	if err != nil {
		panic(err)
	}
	return c
}

// TestMain lets Mesa's rusticl offer its llvmpipe device (a second CPU
// OpenCL implementation with its own compiler) unless RUSTICL_ENABLE says
// otherwise, so that every kernel is built and checked by both it and PoCL
// wherever both are installed, as internal/cltest does for the other
// packages' tests; and it has OpenCL open the library GLINT_OPENCL_LIB names,
// as the generate command does.
func TestMain(m *testing.M) {
	if _, ok := os.LookupEnv("RUSTICL_ENABLE"); !ok {
		os.Setenv("RUSTICL_ENABLE", "llvmpipe")
	}
	cl.SetLibrary(os.Getenv(cl.LibEnv))
	os.Exit(m.Run())
}

// testDevice is one device the tests run on, with one Backend shared by the
// tests that do not need their own: building the program on a CPU device
// takes seconds, and the backend is reused exactly as a model reuses it.
type testDevice struct {
	d    device
	once sync.Once
	b    *Backend
	err  error
}

func (td *testDevice) backend(t testing.TB) *Backend {
	t.Helper()
	td.once.Do(func() { td.b, td.err = open(td.d, nativeVariant(td.d.info), testFlavour) })
	if td.err != nil {
		t.Fatalf("opencl: %s: %v", td.d.info.Name, td.err)
	}
	if err := td.b.Err(); err != nil {
		t.Fatalf("shared backend on %s failed earlier: %v", td.d.info.Name, err)
	}
	return td.b
}

var selected struct {
	once sync.Once
	devs []*testDevice
	err  error
}

// testDevices are the devices GLINT_OPENCL_DEVICES selects ("all", the
// default, or a list for SelectDevices). It skips t, with a one-line
// reason, where OpenCL or any device of it is absent (no loader, no ICD, no
// device): go test ./... passes on a machine without OpenCL.
func testDevices(t testing.TB) []*testDevice {
	t.Helper()
	requireDevice(t)
	selected.once.Do(func() {
		infos, err := SelectDevices(os.Getenv("GLINT_OPENCL_DEVICES"))
		if err != nil {
			selected.err = fmt.Errorf("GLINT_OPENCL_DEVICES: %w", err)
			return
		}
		ds, err := devices()
		if err != nil {
			selected.err = err
			return
		}
		for _, info := range infos {
			selected.devs = append(selected.devs, &testDevice{d: ds[info.Index]})
		}
	})
	if selected.err != nil {
		t.Fatal(selected.err)
	}
	return selected.devs
}

// eachDevice runs f as one subtest per selected device, named by the
// device's ShortName, with the device's shared Backend.
func eachDevice(t *testing.T, f func(t *testing.T, b *Backend)) {
	t.Helper()
	for _, td := range testDevices(t) {
		t.Run(td.d.info.ShortName(), func(t *testing.T) { f(t, td.backend(t)) })
	}
}

// deviceOf is the device b runs on.
func deviceOf(b *Backend) device { return device{b.info, b.dev} }

// needMemory skips t where b's device has less than bytes of global memory
// (llvmpipe offers 2 GiB).
func needMemory(t testing.TB, b *Backend, bytes int64) {
	t.Helper()
	if b.info.GlobalMem < bytes {
		t.Skipf("%s has %s of global memory; this test needs %s", b.info.Name, size(b.info.GlobalMem), size(bytes))
	}
}

// requireDevice skips a test, with a one-line reason, where OpenCL or any
// device of it is absent.
func requireDevice(t testing.TB) []DeviceInfo {
	t.Helper()
	ds, err := Devices()
	if err != nil {
		t.Skipf("no OpenCL device: %s", strings.SplitN(err.Error(), "\n", 2)[0])
	}
	return ds
}

// another opens a new Backend on b's device with b's kernel variants, for a
// test whose errors must not touch b (they are sticky); t closes it.
func another(t testing.TB, b *Backend) *Backend {
	t.Helper()
	o, err := open(deviceOf(b), b.v, testFlavour)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { o.Close() })
	return o
}
