package opencl

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/glint-llm/glint/backend/opencl/cl"
)

// DeviceInfo describes one OpenCL device as Devices lists it.
type DeviceInfo struct {
	// Index is the device's position in Devices' order, the number that
	// Options.Device accepts.
	Index        int
	Platform     string
	Name         string
	Type         string // "GPU", "CPU", "Accelerator" or "Other"
	GlobalMem    int64  // bytes
	LocalMem     int64  // bytes
	MaxAlloc     int64  // bytes, the largest single buffer
	ComputeUnits int
	MaxWorkGroup int
	CVersion     string // OpenCL C version, e.g. "OpenCL C 1.2 PoCL"
	FP16         bool   // cl_khr_fp16
	FP64         bool   // cl_khr_fp64 (RoPE uses it where present, see rope.cl)
	Subgroups    bool   // cl_khr_subgroups or cl_intel_subgroups
	IntDot       bool   // cl_khr_integer_dot_product (gemm.cl's DOT4 takes it)
	// CorrectDivide: CL_FP_CORRECTLY_ROUNDED_DIVIDE_SQRT in
	// CL_DEVICE_SINGLE_FP_CONFIG (see variant.options).
	CorrectDivide bool
}

func (d DeviceInfo) String() string {
	yes := map[bool]string{true: "yes", false: "no"}
	return fmt.Sprintf("#%d %s: %s (%s, %d CU, %s global, %s max alloc, %s local, %s, fp16 %s, subgroups %s, int dot %s)",
		d.Index, d.Platform, d.Name, d.Type, d.ComputeUnits, size(d.GlobalMem), size(d.MaxAlloc), size(d.LocalMem),
		d.CVersion, yes[d.FP16], yes[d.Subgroups], yes[d.IntDot])
}

func size(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// errNoPlatform is what every entry point says when there is nothing to run
// on: most users only lack the ICD package.
var errNoPlatform = errors.New("opencl: no OpenCL platform found: install your GPU vendor's OpenCL driver, " +
	"or a CPU implementation with `apt install pocl-opencl-icd`")

type device struct {
	info DeviceInfo
	dev  cl.Device
}

// Devices lists every device of every platform, in the order the index of
// Options.Device refers to.
func Devices() ([]DeviceInfo, error) {
	ds, err := devices()
	if err != nil {
		return nil, err
	}
	infos := make([]DeviceInfo, len(ds))
	for i, d := range ds {
		infos[i] = d.info
	}
	return infos, nil
}

func devices() ([]device, error) {
	plats, err := cl.Platforms()
	if err != nil {
		return nil, err
	}
	if len(plats) == 0 {
		return nil, errNoPlatform
	}
	var out []device
	for _, p := range plats {
		pname, err := p.Name()
		if err != nil {
			return nil, err
		}
		devs, err := p.Devices()
		if err != nil {
			return nil, fmt.Errorf("opencl: platform %q: %w", pname, err)
		}
		for _, d := range devs {
			info, err := describe(d)
			if err != nil {
				return nil, fmt.Errorf("opencl: platform %q: %w", pname, err)
			}
			info.Index = len(out)
			info.Platform = pname
			out = append(out, device{info, d})
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w (platforms are installed but report no device)", errNoPlatform)
	}
	return out, nil
}

func describe(d cl.Device) (DeviceInfo, error) {
	var info DeviceInfo
	var errs []error
	keep := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	var err error
	info.Name, err = d.Name()
	keep(err)
	typ, err := d.Type()
	keep(err)
	switch {
	case typ&cl.TypeGPU != 0:
		info.Type = "GPU"
	case typ&cl.TypeCPU != 0:
		info.Type = "CPU"
	case typ&cl.TypeAccelerator != 0:
		info.Type = "Accelerator"
	default:
		info.Type = "Other"
	}
	g, err := d.GlobalMem()
	keep(err)
	l, err := d.LocalMem()
	keep(err)
	m, err := d.MaxAlloc()
	keep(err)
	info.GlobalMem, info.LocalMem, info.MaxAlloc = int64(g), int64(l), int64(m)
	cu, err := d.ComputeUnits()
	keep(err)
	info.ComputeUnits = int(cu)
	info.MaxWorkGroup, err = d.MaxWorkGroup()
	keep(err)
	info.CVersion, err = d.CVersion()
	keep(err)
	info.CorrectDivide, err = d.CorrectDivide()
	keep(err)
	exts, err := d.Extensions()
	keep(err)
	for _, e := range exts {
		switch e {
		case "cl_khr_fp16":
			info.FP16 = true
		case "cl_khr_fp64":
			info.FP64 = true
		case "cl_khr_subgroups", "cl_intel_subgroups":
			info.Subgroups = true
		case "cl_khr_integer_dot_product":
			info.IntDot = true
		}
	}
	if len(errs) > 0 {
		return info, fmt.Errorf("device %q: %w", info.Name, errors.Join(errs...))
	}
	return info, nil
}

// pick applies an Options.Device selector: "" is the first GPU, else the
// first device; a number is an index; anything else is a device's
// ShortName ("pocl") or a case-insensitive substring of the device name (or
// "platform: name").
func pick(ds []device, sel string) (device, error) {
	sel = strings.TrimSpace(sel)
	if sel == "" {
		for _, d := range ds {
			if d.info.Type == "GPU" {
				return d, nil
			}
		}
		return ds[0], nil
	}
	if i, err := strconv.Atoi(sel); err == nil {
		if i < 0 || i >= len(ds) {
			return device{}, fmt.Errorf("opencl: device index %d out of range: %d device(s):\n%s", i, len(ds), list(ds))
		}
		return ds[i], nil
	}
	low := strings.ToLower(sel)
	for _, d := range ds {
		if strings.EqualFold(d.info.ShortName(), sel) || strings.Contains(strings.ToLower(d.info.Platform+": "+d.info.Name), low) {
			return d, nil
		}
	}
	return device{}, fmt.Errorf("opencl: no device matches %q; devices:\n%s", sel, list(ds))
}

func list(ds []device) string {
	var b strings.Builder
	for _, d := range ds {
		b.WriteString("  " + d.info.String() + "\n")
	}
	return strings.TrimRight(b.String(), "\n")
}
