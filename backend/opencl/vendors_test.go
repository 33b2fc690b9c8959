package opencl

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestUnregistered finds a GPU driver that no ICD file names, whether the
// registry is a folder or one file, by its own folder or LD_LIBRARY_PATH's,
// and not once an ICD file names it (by path or by name).
func TestUnregistered(t *testing.T) {
	root := t.TempDir()
	mk := func(rel, text string) string {
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	nv := mk("nvidia/lib64/libnvidia-opencl.so.1", "")
	amd := mk("ld/libamdocl64.so", "")
	mk("vendors/pocl.icd", "libpocl.so.2\n")
	drivers := []gpuDriver{
		{"NVIDIA", "libnvidia-opencl.so.1", []string{filepath.Join(root, "none"), filepath.Join(root, "nvidia/lib64")}},
		{"AMD", "libamdocl64.so", []string{filepath.Join(root, "rocm")}},
		{"Intel", "libigdrcl.so", []string{root}},
	}
	s := driverSearch{drivers: drivers, vendors: filepath.Join(root, "vendors")}
	want := []Driver{{"NVIDIA", nv}}
	if got := s.unregistered(); !slices.Equal(got, want) {
		t.Fatalf("unregistered = %v, want %v", got, want)
	}
	s.libPath = []string{filepath.Join(root, "ld")}
	want = append(want, Driver{"AMD", amd})
	if got := s.unregistered(); !slices.Equal(got, want) {
		t.Fatalf("with LD_LIBRARY_PATH: unregistered = %v, want %v", got, want)
	}
	hint := registerHint(want)
	for _, w := range []string{"echo " + nv + " > /etc/OpenCL/vendors/nvidia.icd", "echo " + amd + " > /tmp/icd/amd.icd", "export OCL_ICD_VENDORS=/tmp/icd"} {
		if !strings.Contains(hint, w) {
			t.Errorf("hint lacks %q:\n%s", w, hint)
		}
	}
	// The registry folder keeps the loader's files and adds the drivers.
	reg := filepath.Join(root, "reg")
	if got, err := s.writeRegistry(reg); err != nil || !slices.Equal(got, want) {
		t.Fatalf("writeRegistry = %v, %v; want %v", got, err, want)
	}
	for name, text := range map[string]string{"pocl.icd": "libpocl.so.2\n", "nvidia.icd": nv + "\n", "amd.icd": amd + "\n"} {
		if b, err := os.ReadFile(filepath.Join(reg, name)); err != nil || string(b) != text {
			t.Errorf("%s: %q, %v; want %q", name, b, err, text)
		}
	}
	if got := (driverSearch{drivers: drivers, libPath: s.libPath, vendors: reg}).unregistered(); len(got) != 0 {
		t.Errorf("with the written folder as OCL_ICD_VENDORS: unregistered = %v", got)
	}
	mk("vendors/nvidia.icd", nv+"\n")
	mk("vendors/amd.icd", "libamdocl64.so\n")
	if got := s.unregistered(); len(got) != 0 {
		t.Fatalf("registered drivers reported: %v", got)
	}
	// OCL_ICD_VENDORS may name one file: only it counts.
	s.vendors = filepath.Join(root, "vendors/pocl.icd")
	if got := s.unregistered(); len(got) != 2 {
		t.Fatalf("with one ICD file: unregistered = %v, want NVIDIA and AMD", got)
	}
	if registerHint(nil) != "" {
		t.Fatal("a hint with nothing to register")
	}
}

// TestICDSearch: an ICD with no registry is the loader's default folder,
// its library path loses the empty entries a split LD_LIBRARY_PATH has
// ("a::b", a trailing ":"), and the drivers searched are every vendor's.
func TestICDSearch(t *testing.T) {
	s := ICD{LibPath: []string{"", "/a", "", "/b", ""}}.search()
	if s.vendors != "/etc/OpenCL/vendors" {
		t.Errorf("default registry %q, want /etc/OpenCL/vendors", s.vendors)
	}
	if want := []string{"/a", "/b"}; !slices.Equal(s.libPath, want) {
		t.Errorf("library path %q, want %q", s.libPath, want)
	}
	if len(s.drivers) != len(gpuDrivers) {
		t.Errorf("%d drivers searched, want %d", len(s.drivers), len(gpuDrivers))
	}
	if s := (ICD{Vendors: "/x/icd"}).search(); s.vendors != "/x/icd" {
		t.Errorf("registry %q, want /x/icd", s.vendors)
	}
}
