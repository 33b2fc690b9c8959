// Package cl is glint's thin cgo binding to the OpenCL 1.2 C API: only the
// calls the OpenCL backend makes. Every failure is an *Error naming the call
// and the CL_* status. The calls on the per-token path (kernel arguments,
// launches, small reads) do not allocate on the Go heap: scalars and handles
// go to C by value and the C helpers below take their addresses.
//
// Queue counts the bytes it moves each way and the kernels it launches, so a
// caller can check how much traffic a token costs.
//
// The library is not linked: Load (which Platforms calls) opens
// libOpenCL.so.1, or the library SetLibrary names, with dlopen, so a
// program that uses only the CPU runs where no OpenCL loader is installed,
// and one that asks for OpenCL there is told what to install.
package cl

/*
#cgo LDFLAGS: -ldl
#cgo noescape glintWrite
#cgo nocallback glintWrite
#cgo noescape glintRead
#cgo nocallback glintRead
#cgo noescape glintBuild
#cgo noescape gclGetPlatformInfo
#cgo noescape gclGetDeviceInfo
#cgo noescape gclGetPlatformIDs
#cgo noescape gclGetDeviceIDs
#cgo noescape gclGetProgramBuildInfo
#cgo noescape gclGetKernelWorkGroupInfo
#define CL_TARGET_OPENCL_VERSION 120
#define CL_USE_DEPRECATED_OPENCL_1_2_APIS
#include <CL/cl.h>
#include <stdlib.h>
#include <dlfcn.h>

// libOpenCL is opened at run time (glintLoad), so that a binary that never
// uses OpenCL starts where no loader is installed. Each entry point is a
// pointer of the header's own type, and the macros below make the helpers'
// calls go through them.
#define GLINT_CL_FUNCS(X) \
	X(clGetPlatformIDs) X(clGetPlatformInfo) X(clGetDeviceIDs) X(clGetDeviceInfo) \
	X(clCreateContext) X(clReleaseContext) X(clCreateCommandQueue) X(clReleaseCommandQueue) \
	X(clCreateBuffer) X(clReleaseMemObject) X(clCreateProgramWithSource) X(clBuildProgram) \
	X(clGetProgramBuildInfo) X(clReleaseProgram) X(clCreateKernel) X(clReleaseKernel) \
	X(clSetKernelArg) X(clGetKernelWorkGroupInfo) X(clEnqueueNDRangeKernel) \
	X(clEnqueueWriteBuffer) X(clEnqueueReadBuffer) X(clEnqueueCopyBuffer) X(clEnqueueFillBuffer) \
	X(clGetEventProfilingInfo) X(clReleaseEvent) X(clFlush) X(clFinish)

#define GLINT_DECLARE(f) static __typeof__(f) *glint_##f;
GLINT_CL_FUNCS(GLINT_DECLARE)

// glintLoad opens the library at path and finds every entry point: 0 on
// success; 1 when the library cannot be opened, 2 when it lacks an entry
// point, with *what the loader's message or the missing name.
static int glintLoad(const char *path, const char **what) {
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (h == NULL) {
		*what = dlerror();
		return 1;
	}
	// All or nothing: a library that lacks one entry point changes none.
#define GLINT_CHECK(f) if (dlsym(h, #f) == NULL) { *what = #f; dlclose(h); return 2; }
	GLINT_CL_FUNCS(GLINT_CHECK)
#undef GLINT_CHECK
#define GLINT_FIND(f) glint_##f = (__typeof__(f) *)dlsym(h, #f);
	GLINT_CL_FUNCS(GLINT_FIND)
#undef GLINT_FIND
	return 0;
}

#define clGetPlatformIDs (*glint_clGetPlatformIDs)
#define clGetPlatformInfo (*glint_clGetPlatformInfo)
#define clGetDeviceIDs (*glint_clGetDeviceIDs)
#define clGetDeviceInfo (*glint_clGetDeviceInfo)
#define clCreateContext (*glint_clCreateContext)
#define clReleaseContext (*glint_clReleaseContext)
#define clCreateCommandQueue (*glint_clCreateCommandQueue)
#define clReleaseCommandQueue (*glint_clReleaseCommandQueue)
#define clCreateBuffer (*glint_clCreateBuffer)
#define clReleaseMemObject (*glint_clReleaseMemObject)
#define clCreateProgramWithSource (*glint_clCreateProgramWithSource)
#define clBuildProgram (*glint_clBuildProgram)
#define clGetProgramBuildInfo (*glint_clGetProgramBuildInfo)
#define clReleaseProgram (*glint_clReleaseProgram)
#define clCreateKernel (*glint_clCreateKernel)
#define clReleaseKernel (*glint_clReleaseKernel)
#define clSetKernelArg (*glint_clSetKernelArg)
#define clGetKernelWorkGroupInfo (*glint_clGetKernelWorkGroupInfo)
#define clEnqueueNDRangeKernel (*glint_clEnqueueNDRangeKernel)
#define clEnqueueWriteBuffer (*glint_clEnqueueWriteBuffer)
#define clEnqueueReadBuffer (*glint_clEnqueueReadBuffer)
#define clEnqueueCopyBuffer (*glint_clEnqueueCopyBuffer)
#define clEnqueueFillBuffer (*glint_clEnqueueFillBuffer)
#define clGetEventProfilingInfo (*glint_clGetEventProfilingInfo)
#define clReleaseEvent (*glint_clReleaseEvent)
#define clFlush (*glint_clFlush)
#define clFinish (*glint_clFinish)

// Go calls these (cgo cannot call through a pointer).
static cl_int gclGetPlatformIDs(cl_uint n, cl_platform_id *ids, cl_uint *num) { return clGetPlatformIDs(n, ids, num); }
static cl_int gclGetPlatformInfo(cl_platform_id p, cl_platform_info param, size_t size, void *v, size_t *ret) { return clGetPlatformInfo(p, param, size, v, ret); }
static cl_int gclGetDeviceIDs(cl_platform_id p, cl_device_type t, cl_uint n, cl_device_id *ids, cl_uint *num) { return clGetDeviceIDs(p, t, n, ids, num); }
static cl_int gclGetDeviceInfo(cl_device_id d, cl_device_info param, size_t size, void *v, size_t *ret) { return clGetDeviceInfo(d, param, size, v, ret); }
static cl_int gclGetKernelWorkGroupInfo(cl_kernel k, cl_device_id d, cl_kernel_work_group_info param, size_t size, void *v, size_t *ret) { return clGetKernelWorkGroupInfo(k, d, param, size, v, ret); }
static cl_int gclGetProgramBuildInfo(cl_program p, cl_device_id d, cl_program_build_info param, size_t size, void *v, size_t *ret) { return clGetProgramBuildInfo(p, d, param, size, v, ret); }
static cl_int gclReleaseContext(cl_context c) { return clReleaseContext(c); }
static cl_int gclReleaseCommandQueue(cl_command_queue q) { return clReleaseCommandQueue(q); }
static cl_int gclReleaseMemObject(cl_mem m) { return clReleaseMemObject(m); }
static cl_int gclReleaseProgram(cl_program p) { return clReleaseProgram(p); }
static cl_int gclReleaseKernel(cl_kernel k) { return clReleaseKernel(k); }
static cl_int gclReleaseEvent(cl_event e) { return clReleaseEvent(e); }
static cl_int gclFlush(cl_command_queue q) { return clFlush(q); }
static cl_int gclFinish(cl_command_queue q) { return clFinish(q); }

typedef struct { cl_int err; void *p; } glintRes;

static glintRes glintContext(cl_device_id d) {
	glintRes r;
	r.p = clCreateContext(NULL, 1, &d, NULL, NULL, &r.err);
	return r;
}

static glintRes glintQueue(cl_context c, cl_device_id d, cl_command_queue_properties props) {
	glintRes r;
	r.p = clCreateCommandQueue(c, d, props, &r.err);
	return r;
}

static glintRes glintBuffer(cl_context c, size_t size) {
	glintRes r;
	r.p = clCreateBuffer(c, CL_MEM_READ_WRITE, size, NULL, &r.err);
	return r;
}

// glintBuild creates and builds a program; on a build failure the program
// is returned too, so that the caller can fetch the log.
static glintRes glintBuild(cl_context c, cl_device_id d, const char *src, size_t len, const char *opts, cl_int *buildErr) {
	glintRes r;
	*buildErr = CL_SUCCESS;
	r.p = clCreateProgramWithSource(c, 1, &src, &len, &r.err);
	if (r.err != CL_SUCCESS) return r;
	*buildErr = clBuildProgram((cl_program)r.p, 1, &d, opts, NULL, NULL);
	return r;
}

static glintRes glintKernel(cl_program p, const char *name) {
	glintRes r;
	r.p = clCreateKernel(p, name, &r.err);
	return r;
}

static cl_int glintArgMem(cl_kernel k, cl_uint i, cl_mem m) { return clSetKernelArg(k, i, sizeof(m), &m); }
static cl_int glintArgI32(cl_kernel k, cl_uint i, cl_int v) { return clSetKernelArg(k, i, sizeof(v), &v); }
static cl_int glintArgU64(cl_kernel k, cl_uint i, cl_ulong v) { return clSetKernelArg(k, i, sizeof(v), &v); }
static cl_int glintArgF32(cl_kernel k, cl_uint i, cl_float v) { return clSetKernelArg(k, i, sizeof(v), &v); }
static cl_int glintArgLocal(cl_kernel k, cl_uint i, size_t n) { return clSetKernelArg(k, i, n, NULL); }

static glintRes glintLaunch(cl_command_queue q, cl_kernel k, cl_uint dims,
		size_t g0, size_t g1, size_t g2, size_t l0, size_t l1, size_t l2, int wantEvent) {
	size_t g[3] = {g0, g1, g2}, l[3] = {l0, l1, l2};
	glintRes r;
	cl_event ev = NULL;
	r.err = clEnqueueNDRangeKernel(q, k, dims, NULL, g, l, 0, NULL, wantEvent ? &ev : NULL);
	r.p = ev;
	return r;
}

static cl_int glintWrite(cl_command_queue q, cl_mem m, size_t off, size_t n, const void *src) {
	return clEnqueueWriteBuffer(q, m, CL_TRUE, off, n, src, 0, NULL, NULL);
}

static cl_int glintRead(cl_command_queue q, cl_mem m, size_t off, size_t n, void *dst) {
	return clEnqueueReadBuffer(q, m, CL_TRUE, off, n, dst, 0, NULL, NULL);
}

static cl_int glintCopy(cl_command_queue q, cl_mem src, cl_mem dst, size_t srcOff, size_t dstOff, size_t n) {
	return clEnqueueCopyBuffer(q, src, dst, srcOff, dstOff, n, 0, NULL, NULL);
}

static cl_int glintZero(cl_command_queue q, cl_mem m, size_t n) {
	cl_uchar zero = 0;
	return clEnqueueFillBuffer(q, m, &zero, 1, 0, n, 0, NULL, NULL);
}

static cl_int glintProfile(cl_event e, cl_ulong *start, cl_ulong *end) {
	cl_int err = clGetEventProfilingInfo(e, CL_PROFILING_COMMAND_START, sizeof(*start), start, NULL);
	if (err != CL_SUCCESS) return err;
	return clGetEventProfilingInfo(e, CL_PROFILING_COMMAND_END, sizeof(*end), end, NULL);
}
*/
import "C"

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"
)

// LibEnv names the environment variable through which programs (cmd/generate,
// the tests) name the library for SetLibrary; this package reads no
// environment itself.
const LibEnv = "GLINT_OPENCL_LIB"

// DefaultLib is the OpenCL ICD loader's soname.
const DefaultLib = "libOpenCL.so.1"

// ErrNoLibrary is wrapped by Load's error when the OpenCL library cannot be
// opened or is not one.
var ErrNoLibrary = errors.New("OpenCL library not found")

// libError says why the library did not load; it is an ErrNoLibrary.
type libError string

func (e libError) Error() string        { return string(e) }
func (e libError) Is(target error) bool { return target == ErrNoLibrary }

var (
	loadOnce sync.Once
	loadErr  error

	libMu   sync.Mutex
	library = DefaultLib
)

// SetLibrary names the OpenCL library Load opens: a file name the dynamic
// loader searches for, or a path; "" is DefaultLib. It counts only before
// the first Load, since an opened library stays for the life of the
// process.
func SetLibrary(name string) {
	if name == "" {
		name = DefaultLib
	}
	libMu.Lock()
	library = name
	libMu.Unlock()
}

// Load opens the OpenCL library (SetLibrary's, else libOpenCL.so.1)
// once and finds its entry points. Platforms calls it, so nothing else
// needs to; it is exported so that a caller can ask whether OpenCL is
// there at all.
func Load() error {
	loadOnce.Do(func() {
		libMu.Lock()
		lib := library
		libMu.Unlock()
		loadErr = load(lib)
	})
	return loadErr
}

// load opens lib and, when it is an OpenCL library, points every entry
// point at it.
func load(lib string) error {
	cs := C.CString(lib)
	defer C.free(unsafe.Pointer(cs))
	var what *C.char
	switch C.glintLoad(cs, &what) {
	case 1:
		return libError(fmt.Sprintf("OpenCL: %s not found: install an OpenCL loader and driver (Debian: ocl-icd-libopencl1 and pocl-opencl-icd or your GPU's ICD) [%s]",
			lib, C.GoString(what)))
	case 2:
		return libError(fmt.Sprintf("OpenCL: %s has no %s: it is not an OpenCL 1.2 loader (Debian: ocl-icd-libopencl1)", lib, C.GoString(what)))
	}
	return nil
}

func check(call string, code C.cl_int) error {
	if code == C.CL_SUCCESS {
		return nil
	}
	return &Error{Call: call, Code: int32(code)}
}

// Platform is an installed OpenCL implementation (an ICD).
type Platform struct{ id C.cl_platform_id }

// Platforms lists the installed platforms. None at all is not an error
// here: the ICD loader reports it as CL_PLATFORM_NOT_FOUND_KHR, which this
// turns into an empty list so that callers can say what to install.
func Platforms() ([]Platform, error) {
	if err := Load(); err != nil {
		return nil, err
	}
	var n C.cl_uint
	code := C.gclGetPlatformIDs(0, nil, &n)
	if code == -1001 || (code == C.CL_SUCCESS && n == 0) {
		return nil, nil
	}
	if err := check("clGetPlatformIDs", code); err != nil {
		return nil, err
	}
	ids := make([]C.cl_platform_id, n)
	if err := check("clGetPlatformIDs", C.gclGetPlatformIDs(n, &ids[0], nil)); err != nil {
		return nil, err
	}
	ps := make([]Platform, n)
	for i, id := range ids {
		ps[i] = Platform{id}
	}
	return ps, nil
}

// Name is CL_PLATFORM_NAME.
func (p Platform) Name() (string, error) {
	var size C.size_t
	if err := check("clGetPlatformInfo", C.gclGetPlatformInfo(p.id, C.CL_PLATFORM_NAME, 0, nil, &size)); err != nil {
		return "", err
	}
	buf := make([]byte, size+1)
	if err := check("clGetPlatformInfo", C.gclGetPlatformInfo(p.id, C.CL_PLATFORM_NAME, size, unsafe.Pointer(&buf[0]), nil)); err != nil {
		return "", err
	}
	return cstring(buf), nil
}

// Devices lists every device of the platform (CL_DEVICE_TYPE_ALL).
func (p Platform) Devices() ([]Device, error) {
	var n C.cl_uint
	code := C.gclGetDeviceIDs(p.id, C.CL_DEVICE_TYPE_ALL, 0, nil, &n)
	if code == C.CL_DEVICE_NOT_FOUND {
		return nil, nil
	}
	if err := check("clGetDeviceIDs", code); err != nil {
		return nil, err
	}
	ids := make([]C.cl_device_id, n)
	if err := check("clGetDeviceIDs", C.gclGetDeviceIDs(p.id, C.CL_DEVICE_TYPE_ALL, n, &ids[0], nil)); err != nil {
		return nil, err
	}
	ds := make([]Device, n)
	for i, id := range ids {
		ds[i] = Device{id}
	}
	return ds, nil
}

func cstring(b []byte) string {
	if i := strings.IndexByte(string(b), 0); i >= 0 {
		b = b[:i]
	}
	return strings.TrimSpace(string(b))
}

// Device is one OpenCL device.
type Device struct{ id C.cl_device_id }

// Device types, as CL_DEVICE_TYPE reports them (a bit set).
const (
	TypeCPU         = uint64(C.CL_DEVICE_TYPE_CPU)
	TypeGPU         = uint64(C.CL_DEVICE_TYPE_GPU)
	TypeAccelerator = uint64(C.CL_DEVICE_TYPE_ACCELERATOR)
)

func (d Device) info(param C.cl_device_info, size uintptr, p unsafe.Pointer) error {
	return check("clGetDeviceInfo", C.gclGetDeviceInfo(d.id, param, C.size_t(size), p, nil))
}

func (d Device) infoString(param C.cl_device_info) (string, error) {
	var size C.size_t
	if err := check("clGetDeviceInfo", C.gclGetDeviceInfo(d.id, param, 0, nil, &size)); err != nil {
		return "", err
	}
	buf := make([]byte, size+1)
	if err := d.info(param, uintptr(size), unsafe.Pointer(&buf[0])); err != nil {
		return "", err
	}
	return cstring(buf), nil
}

func (d Device) infoU64(param C.cl_device_info) (uint64, error) {
	var v C.cl_ulong
	err := d.info(param, unsafe.Sizeof(v), unsafe.Pointer(&v))
	return uint64(v), err
}

func (d Device) infoU32(param C.cl_device_info) (uint32, error) {
	var v C.cl_uint
	err := d.info(param, unsafe.Sizeof(v), unsafe.Pointer(&v))
	return uint32(v), err
}

// Name is CL_DEVICE_NAME.
func (d Device) Name() (string, error) { return d.infoString(C.CL_DEVICE_NAME) }

// CVersion is CL_DEVICE_OPENCL_C_VERSION ("OpenCL C 1.2 …").
func (d Device) CVersion() (string, error) { return d.infoString(C.CL_DEVICE_OPENCL_C_VERSION) }

// Extensions is CL_DEVICE_EXTENSIONS, split on spaces.
func (d Device) Extensions() ([]string, error) {
	s, err := d.infoString(C.CL_DEVICE_EXTENSIONS)
	return strings.Fields(s), err
}

// CorrectDivide reports whether CL_DEVICE_SINGLE_FP_CONFIG has
// CL_FP_CORRECTLY_ROUNDED_DIVIDE_SQRT: whether a program may be built with
// -cl-fp32-correctly-rounded-divide-sqrt.
func (d Device) CorrectDivide() (bool, error) {
	var v C.cl_device_fp_config
	err := d.info(C.CL_DEVICE_SINGLE_FP_CONFIG, unsafe.Sizeof(v), unsafe.Pointer(&v))
	return v&C.CL_FP_CORRECTLY_ROUNDED_DIVIDE_SQRT != 0, err
}

// Type is the CL_DEVICE_TYPE bit set.
func (d Device) Type() (uint64, error) {
	var v C.cl_device_type
	err := d.info(C.CL_DEVICE_TYPE, unsafe.Sizeof(v), unsafe.Pointer(&v))
	return uint64(v), err
}

// GlobalMem is CL_DEVICE_GLOBAL_MEM_SIZE in bytes.
func (d Device) GlobalMem() (uint64, error) { return d.infoU64(C.CL_DEVICE_GLOBAL_MEM_SIZE) }

// LocalMem is CL_DEVICE_LOCAL_MEM_SIZE in bytes.
func (d Device) LocalMem() (uint64, error) { return d.infoU64(C.CL_DEVICE_LOCAL_MEM_SIZE) }

// MaxAlloc is CL_DEVICE_MAX_MEM_ALLOC_SIZE in bytes.
func (d Device) MaxAlloc() (uint64, error) { return d.infoU64(C.CL_DEVICE_MAX_MEM_ALLOC_SIZE) }

// ComputeUnits is CL_DEVICE_MAX_COMPUTE_UNITS.
func (d Device) ComputeUnits() (uint32, error) { return d.infoU32(C.CL_DEVICE_MAX_COMPUTE_UNITS) }

// MaxWorkGroup is CL_DEVICE_MAX_WORK_GROUP_SIZE.
func (d Device) MaxWorkGroup() (int, error) {
	var v C.size_t
	err := d.info(C.CL_DEVICE_MAX_WORK_GROUP_SIZE, unsafe.Sizeof(v), unsafe.Pointer(&v))
	return int(v), err
}

// PreferredMultiple is the kernel's
// CL_KERNEL_PREFERRED_WORK_GROUP_SIZE_MULTIPLE on d: the SIMD width (warp,
// wavefront) that work-group sizes should be a multiple of.
func (k Kernel) PreferredMultiple(d Device) (int, error) {
	var v C.size_t
	err := check("clGetKernelWorkGroupInfo", C.gclGetKernelWorkGroupInfo(k.k, d.id, C.CL_KERNEL_PREFERRED_WORK_GROUP_SIZE_MULTIPLE, C.size_t(unsafe.Sizeof(v)), unsafe.Pointer(&v), nil))
	return int(v), err
}

// Context is an OpenCL context over one device.
type Context struct{ c C.cl_context }

// NewContext creates a context for d.
func NewContext(d Device) (Context, error) {
	r := C.glintContext(d.id)
	if err := check("clCreateContext", r.err); err != nil {
		return Context{}, err
	}
	return Context{C.cl_context(r.p)}, nil
}

// Release releases the context.
func (c Context) Release() { C.gclReleaseContext(c.c) }

// Mem is a device buffer.
type Mem struct{ m C.cl_mem }

// Valid reports whether m refers to a buffer.
func (m Mem) Valid() bool { return m.m != nil }

// NewBuffer allocates size bytes of read-write device memory (not zeroed:
// see Queue.Zero).
func (c Context) NewBuffer(size int) (Mem, error) {
	r := C.glintBuffer(c.c, C.size_t(size))
	if err := check("clCreateBuffer", r.err); err != nil {
		return Mem{}, err
	}
	return Mem{C.cl_mem(r.p)}, nil
}

// Release releases the buffer.
func (m Mem) Release() {
	if m.m != nil {
		C.gclReleaseMemObject(m.m)
	}
}

// Program is a built program.
type Program struct{ p C.cl_program }

// Build compiles source for d with the given options. A compile error is an
// *Error with Call "clBuildProgram", Code CL_BUILD_PROGRAM_FAILURE and the
// compiler's log.
func (c Context) Build(d Device, source, options string) (Program, error) {
	src := C.CString(source)
	defer C.free(unsafe.Pointer(src))
	opts := C.CString(options)
	defer C.free(unsafe.Pointer(opts))
	var buildErr C.cl_int
	r := C.glintBuild(c.c, d.id, src, C.size_t(len(source)), opts, &buildErr)
	if err := check("clCreateProgramWithSource", r.err); err != nil {
		return Program{}, err
	}
	p := Program{C.cl_program(r.p)}
	if buildErr != C.CL_SUCCESS {
		e := &Error{Call: "clBuildProgram", Code: int32(buildErr)}
		e.Log = p.buildLog(d)
		p.Release()
		return Program{}, e
	}
	return p, nil
}

func (p Program) buildLog(d Device) string {
	var size C.size_t
	if C.gclGetProgramBuildInfo(p.p, d.id, C.CL_PROGRAM_BUILD_LOG, 0, nil, &size) != C.CL_SUCCESS || size == 0 {
		return ""
	}
	buf := make([]byte, size+1)
	if C.gclGetProgramBuildInfo(p.p, d.id, C.CL_PROGRAM_BUILD_LOG, size, unsafe.Pointer(&buf[0]), nil) != C.CL_SUCCESS {
		return ""
	}
	return cstring(buf)
}

// Release releases the program.
func (p Program) Release() {
	if p.p != nil {
		C.gclReleaseProgram(p.p)
	}
}

// Kernel is one kernel of a program with its own argument values.
type Kernel struct{ k C.cl_kernel }

// Kernel creates the kernel called name.
func (p Program) Kernel(name string) (Kernel, error) {
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	r := C.glintKernel(p.p, cname)
	if err := check("clCreateKernel "+name, r.err); err != nil {
		return Kernel{}, err
	}
	return Kernel{C.cl_kernel(r.p)}, nil
}

// Release releases the kernel.
func (k Kernel) Release() {
	if k.k != nil {
		C.gclReleaseKernel(k.k)
	}
}

// MaxWorkGroup is the kernel's CL_KERNEL_WORK_GROUP_SIZE on d.
func (k Kernel) MaxWorkGroup(d Device) (int, error) {
	var v C.size_t
	err := check("clGetKernelWorkGroupInfo", C.gclGetKernelWorkGroupInfo(k.k, d.id, C.CL_KERNEL_WORK_GROUP_SIZE, C.size_t(unsafe.Sizeof(v)), unsafe.Pointer(&v), nil))
	return int(v), err
}

// SetMem sets argument i to a buffer; a zero Mem passes NULL.
func (k Kernel) SetMem(i int, m Mem) error {
	return check("clSetKernelArg", C.glintArgMem(k.k, C.cl_uint(i), m.m))
}

// SetI32 sets argument i to an int.
func (k Kernel) SetI32(i int, v int32) error {
	return check("clSetKernelArg", C.glintArgI32(k.k, C.cl_uint(i), C.cl_int(v)))
}

// SetU64 sets argument i to a ulong.
func (k Kernel) SetU64(i int, v uint64) error {
	return check("clSetKernelArg", C.glintArgU64(k.k, C.cl_uint(i), C.cl_ulong(v)))
}

// SetF32 sets argument i to a float.
func (k Kernel) SetF32(i int, v float32) error {
	return check("clSetKernelArg", C.glintArgF32(k.k, C.cl_uint(i), C.cl_float(v)))
}

// SetLocal sets argument i to a local-memory array of size bytes.
func (k Kernel) SetLocal(i int, size int) error {
	return check("clSetKernelArg", C.glintArgLocal(k.k, C.cl_uint(i), C.size_t(size)))
}

// Event is a queued command's event (only returned when profiling).
type Event struct{ e C.cl_event }

// Valid reports whether e refers to an event.
func (e Event) Valid() bool { return e.e != nil }

// Times returns the command's start and end in device nanoseconds. The
// command must have completed (after Queue.Finish).
func (e Event) Times() (start, end uint64, err error) {
	var s, en C.cl_ulong
	if err := check("clGetEventProfilingInfo", C.glintProfile(e.e, &s, &en)); err != nil {
		return 0, 0, err
	}
	return uint64(s), uint64(en), nil
}

// Release releases the event.
func (e Event) Release() {
	if e.e != nil {
		C.gclReleaseEvent(e.e)
	}
}

// Queue is an in-order command queue with profiling enabled, counting its
// traffic. Its methods are not safe for concurrent use except the counters.
type Queue struct {
	q C.cl_command_queue

	toDevice, fromDevice, launches atomic.Int64
}

// NewQueue creates an in-order queue on d. Profiling is enabled so that
// launches can ask for timed events; launches that do not cost nothing.
func (c Context) NewQueue(d Device) (*Queue, error) {
	r := C.glintQueue(c.c, d.id, C.CL_QUEUE_PROFILING_ENABLE)
	if err := check("clCreateCommandQueue", r.err); err != nil {
		return nil, err
	}
	return &Queue{q: C.cl_command_queue(r.p)}, nil
}

// Release releases the queue.
func (q *Queue) Release() {
	if q.q != nil {
		C.gclReleaseCommandQueue(q.q)
		q.q = nil
	}
}

// Counters returns bytes written to the device, bytes read from it and
// kernels launched since the queue was made or last reset.
func (q *Queue) Counters() (toDevice, fromDevice, launches int64) {
	return q.toDevice.Load(), q.fromDevice.Load(), q.launches.Load()
}

// ResetCounters zeroes the counters.
func (q *Queue) ResetCounters() {
	q.toDevice.Store(0)
	q.fromDevice.Store(0)
	q.launches.Store(0)
}

// Write copies n bytes from src to m at byte off, waiting until src may be
// reused. src must not hold Go pointers.
func (q *Queue) Write(m Mem, off, n int, src unsafe.Pointer) error {
	if n == 0 {
		return nil
	}
	if err := check("clEnqueueWriteBuffer", C.glintWrite(q.q, m.m, C.size_t(off), C.size_t(n), src)); err != nil {
		return err
	}
	q.toDevice.Add(int64(n))
	return nil
}

// Read copies n bytes of m at byte off into dst, waiting for queued work.
func (q *Queue) Read(m Mem, off, n int, dst unsafe.Pointer) error {
	if n == 0 {
		return nil
	}
	if err := check("clEnqueueReadBuffer", C.glintRead(q.q, m.m, C.size_t(off), C.size_t(n), dst)); err != nil {
		return err
	}
	q.fromDevice.Add(int64(n))
	return nil
}

// Copy queues a device-side copy of n bytes.
func (q *Queue) Copy(src, dst Mem, srcOff, dstOff, n int) error {
	return check("clEnqueueCopyBuffer", C.glintCopy(q.q, src.m, dst.m, C.size_t(srcOff), C.size_t(dstOff), C.size_t(n)))
}

// Zero queues filling the first n bytes of m with zeros.
func (q *Queue) Zero(m Mem, n int) error {
	return check("clEnqueueFillBuffer", C.glintZero(q.q, m.m, C.size_t(n)))
}

// Launch queues k over a dims-dimensional range: global[i] work-items in
// groups of local[i] (each global size a multiple of its local size). With
// wantEvent it returns the command's event, which the caller releases.
func (q *Queue) Launch(k Kernel, dims int, global, local [3]int, wantEvent bool) (Event, error) {
	we := C.int(0)
	if wantEvent {
		we = 1
	}
	r := C.glintLaunch(q.q, k.k, C.cl_uint(dims),
		C.size_t(global[0]), C.size_t(global[1]), C.size_t(global[2]),
		C.size_t(local[0]), C.size_t(local[1]), C.size_t(local[2]), we)
	if err := check("clEnqueueNDRangeKernel", r.err); err != nil {
		return Event{}, err
	}
	q.launches.Add(1)
	return Event{C.cl_event(r.p)}, nil
}

// Flush submits queued commands without waiting.
func (q *Queue) Flush() error { return check("clFlush", C.gclFlush(q.q)) }

// Finish waits for every queued command.
func (q *Queue) Finish() error { return check("clFinish", C.gclFinish(q.q)) }
