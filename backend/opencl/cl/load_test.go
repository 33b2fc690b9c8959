package cl

import (
	"errors"
	"strings"
	"testing"
)

// A library that is not there, or is not OpenCL, is an ErrNoLibrary that
// says what to install, and leaves the entry points as they were: OpenCL
// still works afterwards where it is installed.
func TestLoadErrors(t *testing.T) {
	for _, tc := range []struct{ lib, want string }{
		{"libglint-no-such-opencl.so.1", "libglint-no-such-opencl.so.1 not found: install an OpenCL loader and driver (Debian: ocl-icd-libopencl1 and pocl-opencl-icd"},
		{"libc.so.6", "libc.so.6 has no clGetPlatformIDs"},
	} {
		err := load(tc.lib)
		if !errors.Is(err, ErrNoLibrary) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("load(%q) = %v, want ErrNoLibrary with %q", tc.lib, err, tc.want)
		}
	}
	if err := Load(); err != nil {
		t.Skipf("no OpenCL library here: %v", err)
	}
	if _, err := Platforms(); err != nil {
		t.Fatalf("Platforms after the failed loads: %v", err)
	}
}
