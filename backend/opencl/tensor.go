package opencl

import (
	"errors"
	"fmt"
	"unsafe"

	"github.com/glint-llm/glint/backend"
	"github.com/glint-llm/glint/backend/opencl/cl"
	"github.com/glint-llm/glint/dtype"
)

// tensor is a device buffer holding one tensor in its stored layout.
type tensor struct {
	b      *Backend
	dt     dtype.Type
	shape  []int
	name   string // the weight's name
	weight bool   // made by Weight: read-only
	mem    cl.Mem
	bytes  int // exact size of the data (the buffer may be larger)
	elems  int
	freed  bool
	// ver changes whenever an op or a host write may change the contents
	// (see Backend.touch).
	ver uint64
	// host is what WriteI32 wrote to an I32 tensor, whole, while hostVer
	// is ver (RoPE's positions: ropeRows).
	host    []int32
	hostVer uint64
}

func (t *tensor) DType() dtype.Type { return t.dt }
func (t *tensor) Shape() []int      { return t.shape }

func (t *tensor) String() string {
	if t.weight {
		return fmt.Sprintf("%q %v%v", t.name, t.dt, t.shape)
	}
	return fmt.Sprintf("%v%v", t.dt, t.shape)
}

func ptr[T any](s []T) unsafe.Pointer { return unsafe.Pointer(unsafe.SliceData(s)) }

// newTensor checks that the device can hold a tensor and allocates it.
func (b *Backend) newTensor(what string, dt dtype.Type, shape []int) (*tensor, error) {
	if b.closed {
		return nil, fmt.Errorf("opencl: %s: backend is closed", what)
	}
	if !dt.Valid() {
		return nil, fmt.Errorf("opencl: %s: unsupported type %v", what, dt)
	}
	for _, d := range shape {
		if d < 0 {
			return nil, fmt.Errorf("opencl: %s: negative dimension in shape %v", what, shape)
		}
	}
	n, err := dt.Bytes(shape...)
	if err != nil {
		return nil, fmt.Errorf("opencl: %s: %w", what, err)
	}
	if int64(n) > b.info.MaxAlloc {
		return nil, fmt.Errorf("opencl: %s: %v%v needs %s in one buffer; device %q allows at most %s (CL_DEVICE_MAX_MEM_ALLOC_SIZE)",
			what, dt, shape, size(int64(n)), b.info.Name, size(b.info.MaxAlloc))
	}
	if b.used+int64(n) > b.info.GlobalMem {
		return nil, fmt.Errorf("opencl: %s: %v%v needs %s; device %q has %s of %s global memory left",
			what, dt, shape, size(int64(n)), b.info.Name, size(b.info.GlobalMem-b.used), size(b.info.GlobalMem))
	}
	// OpenCL has no empty buffers; an empty tensor still gets a few bytes.
	mem, err := b.ctx.NewBuffer(max(n, 4))
	if err != nil {
		return nil, fmt.Errorf("opencl: %s: %v%v (%s): %w", what, dt, shape, size(int64(n)), err)
	}
	t := &tensor{b: b, dt: dt, shape: append([]int(nil), shape...), mem: mem, bytes: n, elems: backend.Elems(shape)}
	b.tensors[t] = struct{}{}
	b.used += int64(n)
	return t, nil
}

// Alloc returns a zeroed device tensor.
func (b *Backend) Alloc(dt dtype.Type, shape ...int) (backend.Tensor, error) {
	t, err := b.newTensor("Alloc", dt, shape)
	if err != nil {
		return nil, err
	}
	if err := b.q.Zero(t.mem, max(t.bytes, 4)); err != nil {
		b.Free(t)
		return nil, fmt.Errorf("opencl: Alloc %v%v: %w", dt, shape, err)
	}
	if dt == dtype.I32 {
		t.host, t.hostVer = make([]int32, t.elems), t.ver
	}
	return t, nil
}

// Weight uploads data (dt's stored layout) into a new device tensor; data
// is not referenced afterwards.
func (b *Backend) Weight(name string, dt dtype.Type, shape []int, data []byte) (backend.Tensor, error) {
	what := fmt.Sprintf("weight %q", name)
	t, err := b.newTensor(what, dt, shape)
	if err != nil {
		return nil, err
	}
	if len(data) != t.bytes {
		b.Free(t)
		return nil, fmt.Errorf("opencl: %s: %v%v needs %d bytes, got %d", what, dt, shape, t.bytes, len(data))
	}
	t.name, t.weight = name, true
	if err := b.q.Write(t.mem, 0, len(data), ptr(data)); err != nil {
		b.Free(t)
		return nil, fmt.Errorf("opencl: %s: %w", what, err)
	}
	return t, nil
}

// Free releases t's device memory; using t afterwards is an error.
func (b *Backend) Free(bt backend.Tensor) {
	t, ok := bt.(*tensor)
	if !ok || t == nil || t.b != b || t.freed {
		return
	}
	b.flush()
	t.freed = true
	if _, ok := b.tensors[t]; ok {
		if b.act.src == t {
			b.act.src = nil
		}
		delete(b.tensors, t)
		b.used -= int64(t.bytes)
		// Queued kernels may still use the buffer; OpenCL defers the release
		// until they finish.
		t.mem.Release()
	}
}

// own returns bt as this backend's live tensor, or records why not.
func (b *Backend) own(op, arg string, bt backend.Tensor) *tensor {
	t, ok := bt.(*tensor)
	switch {
	case bt == nil || (ok && t == nil):
		b.fail(fmt.Errorf("opencl: %s: %s is nil", op, arg))
	case !ok:
		b.fail(fmt.Errorf("opencl: %s: %s is a %T, not an OpenCL tensor", op, arg, bt))
	case t.b != b:
		b.fail(fmt.Errorf("opencl: %s: %s belongs to another backend", op, arg))
	case t.freed:
		b.fail(fmt.Errorf("opencl: %s: %s %v was freed", op, arg, t))
	default:
		return t
	}
	return nil
}

var errClosed = errors.New("backend is closed")

// access checks a Write/Read call and returns the byte range.
func (b *Backend) access(op string, write bool, bt backend.Tensor, dt dtype.Type, off, count int) (*tensor, error) {
	if b.closed {
		return nil, fmt.Errorf("opencl: %s: %w", op, errClosed)
	}
	b.flush()
	if b.err != nil {
		return nil, b.err
	}
	t := b.own(op, "tensor", bt)
	if t == nil {
		return nil, b.err
	}
	if write && t.weight {
		return nil, fmt.Errorf("opencl: %s: tensor is the read-only weight %q", op, t.name)
	}
	if write {
		b.touch(t)
	}
	if t.dt != dt {
		return nil, backend.ShapeError("opencl: "+op, "tensor %v is not %v", t, dt)
	}
	if off < 0 || count < 0 || off > t.elems-count {
		return nil, backend.ShapeError("opencl: "+op, "elements [%d, %d) outside tensor %v of %d elements", off, off+count, t, t.elems)
	}
	return t, nil
}

// WriteF32 copies src to t's elements starting at off.
func (b *Backend) WriteF32(t backend.Tensor, off int, src []float32) error {
	tt, err := b.access("WriteF32", true, t, dtype.F32, off, len(src))
	if err != nil {
		return err
	}
	return b.wrapIO("WriteF32", b.q.Write(tt.mem, 4*off, 4*len(src), ptr(src)))
}

// ReadF32 waits for queued work and copies t's elements from off into dst.
func (b *Backend) ReadF32(t backend.Tensor, off int, dst []float32) error {
	if tt, ok := t.(*tensor); ok && tt != nil && tt.dt == dtype.F16 {
		// An F16 tensor (the KV cache) is read as halves and widened
		// exactly on the host.
		tt, err := b.access("ReadF32", false, t, dtype.F16, off, len(dst))
		if err != nil || len(dst) == 0 {
			return err
		}
		h := make([]uint16, len(dst))
		if err := b.wrapIO("ReadF32", b.q.Read(tt.mem, 2*off, 2*len(dst), ptr(h))); err != nil {
			return err
		}
		for i, v := range h {
			dst[i] = dtype.F16ToF32(v)
		}
		return nil
	}
	tt, err := b.access("ReadF32", false, t, dtype.F32, off, len(dst))
	if err != nil {
		return err
	}
	return b.wrapIO("ReadF32", b.q.Read(tt.mem, 4*off, 4*len(dst), ptr(dst)))
}

// WriteI32 copies src to t's elements starting at off.
func (b *Backend) WriteI32(t backend.Tensor, off int, src []int32) error {
	prev, _ := t.(*tensor)
	var kept []int32
	if prev != nil {
		kept = prev.hostValues()
	}
	tt, err := b.access("WriteI32", true, t, dtype.I32, off, len(src))
	if err != nil {
		return err
	}
	if kept != nil || (off == 0 && len(src) == tt.elems) {
		if tt.host == nil {
			tt.host = make([]int32, tt.elems)
		}
		copy(tt.host[off:], src)
		tt.hostVer = tt.ver
	}
	return b.wrapIO("WriteI32", b.q.Write(tt.mem, 4*off, 4*len(src), ptr(src)))
}

// ReadI32 waits for queued work and copies t's elements from off into dst.
func (b *Backend) ReadI32(t backend.Tensor, off int, dst []int32) error {
	tt, err := b.access("ReadI32", false, t, dtype.I32, off, len(dst))
	if err != nil {
		return err
	}
	return b.wrapIO("ReadI32", b.q.Read(tt.mem, 4*off, 4*len(dst), ptr(dst)))
}

// wrapIO records a device failure of a transfer: the queue is unusable
// after one, so it is sticky like an op's.
func (b *Backend) wrapIO(op string, err error) error {
	if err == nil {
		return nil
	}
	b.fail(fmt.Errorf("opencl: %s: %w", op, err))
	return b.err
}

// out is own for a tensor an op writes: weights are read-only.
func (b *Backend) out(op, arg string, bt backend.Tensor) *tensor {
	t := b.own(op, arg, bt)
	if t != nil && t.weight {
		b.fail(fmt.Errorf("opencl: %s: %s is the read-only weight %q", op, arg, t.name))
		return nil
	}
	if t != nil {
		b.touch(t)
	}
	return t
}

// touch gives t a new version: every path that writes a tensor (an op's
// destination through out, a host write through access) calls it before
// queueing the write, so a tensor whose version is unchanged holds what it
// held when the version was read. Versions come from one counter per
// backend, so they also tell tensors apart.
func (b *Backend) touch(t *tensor) {
	b.actVer++
	t.ver = b.actVer
}
