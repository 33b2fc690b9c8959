package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/glint-llm/glint/backend/opencl"
)

// Where the OpenCL library cannot be found (here: pointed at a name that
// does not exist), the CPU backend still runs, and OpenCL says what to
// install.
func TestNoOpenCLLibrary(t *testing.T) {
	model := tinyModel(t)
	env := []string{"GLINT_OPENCL_LIB=libglint-no-such-opencl.so.1"}
	stdout, stderr, code := runEnv(t, env, "-m", model, "-b", "cpu", "-n", "4", "--temp", "0", "--ignore-eos", "--prompt-ids", "1,2,3", "--output", "ids")
	if code != 0 || len(strings.Fields(stdout)) != 4 {
		t.Fatalf("-b cpu without OpenCL: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	for _, args := range [][]string{{"-m", model, "-b", "opencl", "-n", "4", "--prompt-ids", "1,2,3"}, {"devices"}} {
		_, stderr, code = runEnv(t, env, args...)
		if code != 1 || !strings.Contains(stderr, "libglint-no-such-opencl.so.1 not found: install an OpenCL loader and driver (Debian: ocl-icd-libopencl1 and pocl-opencl-icd") {
			t.Errorf("%q without OpenCL: exit %d, stderr %q", args, code, stderr)
		}
	}
}

// The binary does not link libOpenCL (it opens it at run time), so it
// starts where no OpenCL loader is installed. This test binary links what
// generate links.
func TestNotLinkedToOpenCL(t *testing.T) {
	ldd, err := exec.LookPath("ldd")
	if err != nil {
		t.Skip("no ldd here")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(ldd, exe).CombinedOutput()
	if err != nil {
		t.Skipf("ldd %s: %v (%s)", exe, err, out)
	}
	if strings.Contains(string(out), "libOpenCL") {
		t.Fatalf("the binary links libOpenCL:\n%s", out)
	}
}

// haveOpenCL reports whether an OpenCL device is there to test on.
func haveOpenCL() bool {
	ds, err := opencl.Devices()
	return err == nil && len(ds) > 0
}

// needOpenCL skips a test that needs an OpenCL device where there is none.
func needOpenCL(t *testing.T) {
	t.Helper()
	if _, err := opencl.Devices(); err != nil {
		t.Skipf("no OpenCL device: %s", strings.SplitN(err.Error(), "\n", 2)[0])
	}
}

// Where OpenCL offers no GPU, -b opencl warns that it runs on a CPU device,
// and `devices` and the warning say how to register a GPU driver that is on
// the machine but unknown to the ICD loader (here a stand-in file on
// LD_LIBRARY_PATH).
func TestNoGPUWarning(t *testing.T) {
	needOpenCL(t)
	ds, _ := opencl.Devices()
	for _, d := range ds {
		if d.Type == "GPU" {
			t.Skipf("there is a GPU (%s): no warning to check", d.Name)
		}
	}
	lib := t.TempDir()
	if err := os.WriteFile(filepath.Join(lib, "libnvidia-opencl.so.1"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	env := []string{"LD_LIBRARY_PATH=" + lib}
	want := "echo " + filepath.Join(lib, "libnvidia-opencl.so.1") + " > /etc/OpenCL/vendors/nvidia.icd"
	_, stderr, code := runEnv(t, env, "-m", tinyModel(t), "-b", "opencl", "-n", "2", "--prompt-ids", "1,2,3", "--output", "ids")
	if code != 0 || !strings.Contains(stderr, "warning: no OpenCL GPU found: running on "+ds[0].Name) || !strings.Contains(stderr, want) {
		t.Errorf("-b opencl without a GPU: exit %d, stderr %q", code, stderr)
	}
	_, stderr, code = runEnv(t, env, "devices")
	if code != 0 || !strings.Contains(stderr, want) {
		t.Errorf("devices: exit %d, stderr %q", code, stderr)
	}
}

// `devices --register DIR` (scripts/bench-gpu.sh registers the NVIDIA ICD
// with it) takes the loader's registry from OCL_ICD_VENDORS and the library
// folders from LD_LIBRARY_PATH: DIR gets the registry's ICD files and one
// for a driver found on the path, and stdout the export line. It needs no
// OpenCL library.
func TestDevicesRegister(t *testing.T) {
	vendors, lib, dir := t.TempDir(), t.TempDir(), filepath.Join(t.TempDir(), "icd")
	nv := filepath.Join(lib, "libnvidia-opencl.so.1")
	for p, text := range map[string]string{filepath.Join(vendors, "pocl.icd"): "libpocl.so.2\n", nv: ""} {
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	env := []string{"OCL_ICD_VENDORS=" + vendors, "LD_LIBRARY_PATH=" + lib, "GLINT_OPENCL_LIB=libglint-no-such-opencl.so.1"}
	stdout, stderr, code := runEnv(t, env, "devices", "--register", dir)
	if code != 0 || stdout != "export OCL_ICD_VENDORS="+dir+"\n" || !strings.Contains(stderr, "registered NVIDIA's driver "+nv) {
		t.Fatalf("devices --register: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	for name, text := range map[string]string{"pocl.icd": "libpocl.so.2\n", "nvidia.icd": nv + "\n"} {
		if b, err := os.ReadFile(filepath.Join(dir, name)); err != nil || string(b) != text {
			t.Errorf("%s: %q, %v; want %q", name, b, err, text)
		}
	}
}
