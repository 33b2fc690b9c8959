package opencl

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// A GPU machine can have its vendor's OpenCL driver installed but not
// registered with the ICD loader (a container image with the NVIDIA driver
// mounted in, /etc/OpenCL/vendors holding only pocl.icd): the loader then
// offers PoCL alone and glint runs on the CPU without a word. Unregistered
// finds such drivers so that `generate devices` and the no-GPU warning can
// say how to register them.

// gpuDriver is a GPU vendor's OpenCL driver (ICD) by file name, and where
// its packages put it.
type gpuDriver struct {
	vendor, lib string
	dirs        []string
}

var gpuDrivers = []gpuDriver{
	{"NVIDIA", "libnvidia-opencl.so.1", []string{"/usr/local/nvidia/lib64", "/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib", "/usr/lib/aarch64-linux-gnu"}},
	{"AMD", "libamdocl64.so", []string{"/opt/rocm/lib", "/opt/rocm/opencl/lib", "/usr/lib/x86_64-linux-gnu", "/usr/lib64"}},
	{"Intel", "libigdrcl.so", []string{"/usr/lib/x86_64-linux-gnu/intel-opencl", "/usr/lib64/intel-opencl", "/usr/local/lib/intel-opencl"}},
}

// Driver is a GPU vendor's OpenCL driver library found on the machine.
type Driver struct {
	Vendor string // "NVIDIA", "AMD", "Intel"
	Path   string
}

// ICD is where the OpenCL ICD loader finds drivers, as the process's
// environment sets it; the caller reads the environment and fills it in.
type ICD struct {
	// Vendors is the loader's registry (OCL_ICD_VENDORS): a folder of .icd
	// files or one .icd file; "" is /etc/OpenCL/vendors.
	Vendors string
	// LibPath is the library folders searched before a driver's own
	// (LD_LIBRARY_PATH's); empty entries are ignored.
	LibPath []string
}

// driverSearch is what Unregistered looks for and where: the drivers, the
// library folders searched before their own and the loader's registry.
type driverSearch struct {
	drivers []gpuDriver
	libPath []string
	vendors string
}

func (c ICD) search() driverSearch {
	s := driverSearch{drivers: gpuDrivers, vendors: c.Vendors}
	if s.vendors == "" {
		s.vendors = "/etc/OpenCL/vendors"
	}
	for _, d := range c.LibPath {
		if d != "" {
			s.libPath = append(s.libPath, d)
		}
	}
	return s
}

// Unregistered returns the GPU drivers on this machine that no ICD file of
// the loader names.
func (c ICD) Unregistered() []Driver { return c.search().unregistered() }

func (s driverSearch) unregistered() []Driver {
	registered := s.registered()
	var out []Driver
	for _, g := range s.drivers {
		if registered[g.lib] {
			continue
		}
		for _, dir := range append(append([]string(nil), s.libPath...), g.dirs...) {
			p := filepath.Join(dir, g.lib)
			if st, err := os.Stat(p); err == nil && !st.IsDir() {
				out = append(out, Driver{g.vendor, p})
				break
			}
		}
	}
	return out
}

// icdFiles are the loader's ICD files: the registry folder's *.icd, or
// the one file it names.
func (s driverSearch) icdFiles() []string {
	if st, err := os.Stat(s.vendors); err == nil && st.IsDir() {
		files, _ := filepath.Glob(filepath.Join(s.vendors, "*.icd"))
		return files
	}
	return []string{s.vendors}
}

// registered is the base names of the libraries the loader's ICD files
// name (one library, by name or path, per file).
func (s driverSearch) registered() map[string]bool {
	names := map[string]bool{}
	for _, f := range s.icdFiles() {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		if lib := strings.TrimSpace(string(b)); lib != "" {
			names[filepath.Base(lib)] = true
		}
	}
	return names
}

// WriteRegistry makes dir a folder of ICD files for OCL_ICD_VENDORS: the
// loader's own (so that PoCL stays) and one per driver Unregistered finds,
// which it returns.
func (c ICD) WriteRegistry(dir string) ([]Driver, error) { return c.search().writeRegistry(dir) }

func (s driverSearch) writeRegistry(dir string) ([]Driver, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("opencl: ICD folder: %w", err)
	}
	for _, f := range s.icdFiles() {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		if err := os.WriteFile(filepath.Join(dir, filepath.Base(f)), b, 0o644); err != nil {
			return nil, fmt.Errorf("opencl: ICD folder: %w", err)
		}
	}
	ds := s.unregistered()
	for _, d := range ds {
		if err := os.WriteFile(filepath.Join(dir, strings.ToLower(d.Vendor)+".icd"), []byte(d.Path+"\n"), 0o644); err != nil {
			return nil, fmt.Errorf("opencl: ICD folder: %w", err)
		}
	}
	return ds, nil
}

// RegisterHint says how to register the drivers Unregistered finds, or is
// "" where there are none: with root an ICD file in /etc/OpenCL/vendors,
// without it a folder of ICD files (the registered ones copied, so that
// PoCL stays) named by OCL_ICD_VENDORS.
func (c ICD) RegisterHint() string { return registerHint(c.Unregistered()) }

func registerHint(ds []Driver) string {
	if len(ds) == 0 {
		return ""
	}
	var b strings.Builder
	for _, d := range ds {
		fmt.Fprintf(&b, "%s's OpenCL driver %s is on this machine but not registered with the OpenCL ICD loader, so its GPU is not offered.\n", d.Vendor, d.Path)
	}
	b.WriteString("Register it (as root):\n")
	for _, d := range ds {
		fmt.Fprintf(&b, "    echo %s > /etc/OpenCL/vendors/%s.icd\n", d.Path, strings.ToLower(d.Vendor))
	}
	b.WriteString("or, without root, for this shell (generate devices --register /tmp/icd does the first two):\n    mkdir -p /tmp/icd && cp /etc/OpenCL/vendors/*.icd /tmp/icd/")
	for _, d := range ds {
		fmt.Fprintf(&b, " && echo %s > /tmp/icd/%s.icd", d.Path, strings.ToLower(d.Vendor))
	}
	b.WriteString("\n    export OCL_ICD_VENDORS=/tmp/icd\n")
	return b.String()
}
