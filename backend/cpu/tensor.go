package cpu

import (
	"fmt"
	"unsafe"

	"github.com/glint-llm/glint/backend"
	"github.com/glint-llm/glint/dtype"
)

// Tensor is a CPU tensor. data always holds the bytes; f32 and i32 view the
// same memory for F32 and I32 tensors so that kernels index floats directly.
type Tensor struct {
	b      *Backend
	name   string
	dt     dtype.Type
	shape  []int
	data   []byte
	f32    []float32
	i32    []int32
	weight bool
	freed  bool
	// mem is the backend-owned copy data points into, if any (ownWeight).
	mem *mapping
	// x8: a Q4_0 weight whose rows are interleaved in groups of eight
	// (interleave.go); data is not in the file's layout.
	x8 bool
	// version changes on every write (Backend.wrote).
	version uint64
}

// DType implements backend.Tensor.
func (t *Tensor) DType() dtype.Type { return t.dt }

// Shape implements backend.Tensor. The slice is the tensor's own: callers
// must not modify it (returning it avoids an allocation per op).
func (t *Tensor) Shape() []int { return t.shape }

// checkShape validates a shape for dt and returns its byte size.
func checkShape(op string, dt dtype.Type, shape []int) (int, error) {
	if !dt.Valid() {
		return 0, fmt.Errorf("cpu: %s: unsupported type %v", op, dt)
	}
	if len(shape) == 0 {
		return 0, backend.ShapeError("cpu: "+op, "empty shape")
	}
	for i, d := range shape {
		if d <= 0 {
			return 0, backend.ShapeError("cpu: "+op, "dimension %d of %v is %d", i, shape, d)
		}
	}
	n, err := dt.Bytes(shape...)
	if err != nil {
		return 0, fmt.Errorf("cpu: %s: %w", op, err)
	}
	return n, nil
}

// Alloc implements backend.Backend.
func (b *Backend) Alloc(dt dtype.Type, shape ...int) (backend.Tensor, error) {
	if b.closed {
		return nil, fmt.Errorf("cpu: Alloc: %w", errClosed)
	}
	size, err := checkShape("Alloc", dt, shape)
	if err != nil {
		return nil, err
	}
	t := &Tensor{b: b, dt: dt, shape: append([]int(nil), shape...)}
	switch dt {
	case dtype.F32:
		t.f32 = make([]float32, size/4)
		t.data = unsafe.Slice((*byte)(unsafe.Pointer(&t.f32[0])), size)
	case dtype.I32:
		t.i32 = make([]int32, size/4)
		t.data = unsafe.Slice((*byte)(unsafe.Pointer(&t.i32[0])), size)
	default:
		t.data = make([]byte, size)
	}
	return t, nil
}

// Weight implements backend.Backend. Quantised and half-precision weights
// (the matmul weights) are copied into memory the backend owns (ownWeight);
// F32 and I32 data is referenced, not copied, except when its bytes are not
// 4-byte aligned, when it is copied once into aligned memory.
func (b *Backend) Weight(name string, dt dtype.Type, shape []int, data []byte) (backend.Tensor, error) {
	if b.closed {
		return nil, fmt.Errorf("cpu: weight %q: %w", name, errClosed)
	}
	size, err := checkShape("Weight", dt, shape)
	if err != nil {
		return nil, fmt.Errorf("weight %q: %w", name, err)
	}
	if len(data) != size {
		return nil, backend.ShapeError("cpu: weight "+fmt.Sprintf("%q", name), "%v %v needs %d bytes, got %d", dt, shape, size, len(data))
	}
	t := &Tensor{b: b, name: name, dt: dt, shape: append([]int(nil), shape...), data: data, weight: true}
	if dt != dtype.F32 && dt != dtype.I32 {
		if err := b.ownWeight(t); err != nil {
			return nil, fmt.Errorf("cpu: weight %q: %w", name, err)
		}
	}
	if dt == dtype.F32 || dt == dtype.I32 {
		if uintptr(unsafe.Pointer(&data[0]))%4 != 0 {
			aligned := make([]float32, size/4)
			t.data = unsafe.Slice((*byte)(unsafe.Pointer(&aligned[0])), size)
			copy(t.data, data)
		}
		p := unsafe.Pointer(&t.data[0])
		if dt == dtype.F32 {
			t.f32 = unsafe.Slice((*float32)(p), size/4)
		} else {
			t.i32 = unsafe.Slice((*int32)(p), size/4)
		}
	}
	return t, nil
}

// Free implements backend.Backend. It releases a weight's backend-owned copy
// at once; other memory is the garbage collector's. Later use is an error.
func (b *Backend) Free(t backend.Tensor) {
	ct, err := b.own("Free", "tensor", t)
	if err != nil {
		b.fail(err)
		return
	}
	ct.freed = true
	if ct.mem != nil {
		b.release(ct.mem)
		ct.mem = nil
	}
	ct.data, ct.f32, ct.i32 = nil, nil, nil
}

// hostRange validates a host copy of count elements at off.
func (b *Backend) hostRange(op string, t backend.Tensor, dt dtype.Type, off, count int) (*Tensor, error) {
	if b.closed {
		return nil, fmt.Errorf("cpu: %s: %w", op, errClosed)
	}
	ct, err := b.own(op, "tensor", t)
	if err != nil {
		return nil, err
	}
	if ct.dt != dt {
		return nil, backend.ShapeError("cpu: "+op, "tensor %q is %v, want %v", ct.name, ct.dt, dt)
	}
	if n := backend.Elems(ct.shape); off < 0 || count > n-off {
		return nil, backend.ShapeError("cpu: "+op, "%d elements at offset %d outside %v tensor of %d", count, off, ct.shape, n)
	}
	return ct, nil
}

// WriteF32 implements backend.Backend.
func (b *Backend) WriteF32(t backend.Tensor, off int, src []float32) error {
	ct, err := b.hostRange("WriteF32", t, dtype.F32, off, len(src))
	if err == nil && ct.weight {
		err = fmt.Errorf("cpu: WriteF32: %q is a read-only weight", ct.name)
	}
	if err != nil {
		return err
	}
	b.wrote(ct)
	copy(ct.f32[off:], src)
	return nil
}

// ReadF32 implements backend.Backend.
func (b *Backend) ReadF32(t backend.Tensor, off int, dst []float32) error {
	if ct, ok := t.(*Tensor); ok && ct != nil && ct.dt == dtype.F16 {
		// An F16 tensor (the KV cache) widens exactly.
		ct, err := b.hostRange("ReadF32", t, dtype.F16, off, len(dst))
		if err != nil {
			return err
		}
		for i, h := range halfs(ct)[off : off+len(dst)] {
			dst[i] = dtype.F16ToF32(h)
		}
		return nil
	}
	if ct, ok := t.(*Tensor); ok && ct != nil && cacheType(ct.dt) {
		// A BF16 or quantised cache: its values dequantised.
		if b.closed {
			return fmt.Errorf("cpu: ReadF32: %w", errClosed)
		}
		if _, err := b.own("ReadF32", "tensor", t); err != nil {
			return err
		}
		return readCache(ct, off, dst)
	}
	ct, err := b.hostRange("ReadF32", t, dtype.F32, off, len(dst))
	if err != nil {
		return err
	}
	copy(dst, ct.f32[off:])
	return nil
}

// WriteI32 implements backend.Backend.
func (b *Backend) WriteI32(t backend.Tensor, off int, src []int32) error {
	ct, err := b.hostRange("WriteI32", t, dtype.I32, off, len(src))
	if err == nil && ct.weight {
		err = fmt.Errorf("cpu: WriteI32: %q is a read-only weight", ct.name)
	}
	if err != nil {
		return err
	}
	b.wrote(ct)
	copy(ct.i32[off:], src)
	return nil
}

// ReadI32 implements backend.Backend.
func (b *Backend) ReadI32(t backend.Tensor, off int, dst []int32) error {
	ct, err := b.hostRange("ReadI32", t, dtype.I32, off, len(dst))
	if err != nil {
		return err
	}
	copy(dst, ct.i32[off:])
	return nil
}
