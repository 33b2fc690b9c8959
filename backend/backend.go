// Package backend defines the operations a model is built from, at the level
// of ggml's ops: small, named and typed. A Backend owns its tensors (host
// memory for the CPU, device buffers for OpenCL) and implements every op; the
// model code in package layers never knows which backend runs it.
//
// Conventions shared by every op:
//   - Shapes are row-major with the outermost dimension first. A weight
//     matrix is [out, in] (ggml's ne = {in, out}); activations are F32
//     [rows, cols] where a row is one token.
//   - Ops that take n act on the first n rows only, so a workspace sized for
//     the largest batch serves every batch without views or allocation.
//   - Ops do not return errors: a backend records the first failure (a bad
//     shape, a device error) and returns it from Err and Sync, the way
//     bufio.Writer does. That keeps the forward pass readable as math.
//   - Ops may be asynchronous (OpenCL queues them); Read*, Sync and Err wait.
package backend

import (
	"errors"
	"fmt"

	"github.com/glint-llm/glint/dtype"
)

// Tensor is a buffer owned by one Backend. Its concrete type is the
// backend's; passing a tensor to another backend is an error.
type Tensor interface {
	DType() dtype.Type
	Shape() []int
}

// Rope describes a rotary position embedding.
type Rope struct {
	// Dims is how many leading dimensions of each head rotate
	// (rope.dimension_count; usually the head size).
	Dims int
	// Theta is the base frequency (rope.freq_base).
	Theta float32
	// Freqs, when not nil, is an F32 [Dims/2] tensor of per-pair divisors of
	// the frequency (Llama 3's rope_freqs.weight).
	Freqs Tensor
	// NeoX rotates pairs (i, i+Dims/2) as Hugging Face does; otherwise pairs
	// are adjacent (2i, 2i+1), as in GGUF llama files whose Q/K rows the
	// converter permuted.
	NeoX bool
}

// Backend is a device that stores tensors and runs ops on them.
type Backend interface {
	// Name is the backend's short name ("cpu", "opencl").
	Name() string
	// Device describes the hardware (CPU model, OpenCL device name).
	Device() string

	// Alloc returns a zeroed tensor of the given type and shape.
	Alloc(dt dtype.Type, shape ...int) (Tensor, error)
	// Weight makes a read-only tensor from bytes in dt's stored layout (never
	// expanded to F32). data is usually mmap'd and must outlive the tensor:
	// the CPU backend references F32 data in place and copies other types
	// into huge-page memory it streams faster; device backends upload it.
	// Either way the loader may then release the mapped pages
	// (model.PageReleaser), so a model is resident once.
	Weight(name string, dt dtype.Type, shape []int, data []byte) (Tensor, error)
	// Free releases a tensor; using it afterwards is an error.
	Free(t Tensor)

	// WriteF32/ReadF32 copy count elements between host memory and an F32
	// tensor starting at element off (ReadF32 also widens an F16 tensor,
	// such as the KV cache, exactly); WriteI32/ReadI32 likewise for I32.
	WriteF32(t Tensor, off int, src []float32) error
	ReadF32(t Tensor, off int, dst []float32) error
	WriteI32(t Tensor, off int, src []int32) error
	ReadI32(t Tensor, off int, dst []int32) error

	// Embedding gathers rows of table (any weight type, [vocab, dim]) into
	// F32 dst[i, :] = table[ids[i], :] for i < n; ids is I32.
	Embedding(dst, table, ids Tensor, n int)
	// MatMulTransposed computes dst[i, o] = Σ_k x[i, k]·w[o, k] for i < n,
	// with w in its stored type (dequantised on the fly, never expanded).
	// For quantised w, x is first rounded to w.DType().ActivationType() as
	// dtype.RoundActivations defines (llama.cpp's arithmetic, which allows
	// integer dot products); every backend rounds identically.
	MatMulTransposed(dst, x, w Tensor, n int)
	// RMSNorm computes dst[i, :] = x[i, :] / sqrt(mean(x[i, :]²) + eps) · w.
	RMSNorm(dst, x, w Tensor, n int, eps float32)
	// RoPE rotates, in place, the heads of x ([n, heads·headDim]) of tokens
	// at positions pos0 … pos0+n-1.
	RoPE(x Tensor, n, heads, headDim, pos0 int, r Rope)
	// SiLUMul computes dst = silu(gate) · up elementwise (SwiGLU).
	SiLUMul(dst, gate, up Tensor, n int)
	// Add computes dst = a + b elementwise (dst may be a or b).
	Add(dst, a, b Tensor, n int)
	// Copy copies the first n rows of src to dst.
	Copy(dst, src Tensor, n int)
	// CopySlice copies count elements from src at element srcOff to dst at
	// element dstOff (the KV-cache append). src and dst have one type, or src
	// is F32 and dst F16 (an f16 KV cache): each value then rounds to the
	// nearest f16, ties to even, as ggml's F32→F16 copy does.
	CopySlice(dst Tensor, dstOff int, src Tensor, srcOff, count int)
	// AttentionGen is decode attention: one query row q ([heads·headDim])
	// over the first kvLen positions of the caches k and v
	// ([maxSeq, kvHeads, headDim], each F32 or F16), written to out
	// ([heads·headDim]). Query head h reads KV head h/(heads/kvHeads)
	// (grouped-query attention). The arithmetic is llama.cpp's: over an F16
	// K the query is rounded to f16 before the dot products; scores are
	// scaled, softmaxed in float32 and normalised before they weight V; over
	// an F16 V each probability is rounded to f16 first.
	AttentionGen(out, q, k, v Tensor, kvLen, heads, kvHeads, headDim int, scale float32)
	// Attention is causal prefill attention: query row i (position pos0+i)
	// attends to cache positions 0 … pos0+i.
	Attention(out, q, k, v Tensor, n, pos0, heads, kvHeads, headDim int, scale float32)
	// Softmax normalises each of the first n rows of x in place.
	Softmax(x Tensor, n int)
	// Argmax writes, for each of the first n rows of x, the index of its
	// largest element (the first on ties) to the I32 tensor dst.
	Argmax(dst, x Tensor, n int)

	// Sync waits for queued work and returns the first error since the
	// backend was made (errors are sticky: a failed backend stays failed).
	Sync() error
	// Err returns the first recorded error without waiting.
	Err() error
	// Close releases every tensor and the device.
	Close() error
}

// ErrShape is wrapped by errors about mismatched tensor shapes or types.
var ErrShape = errors.New("shape mismatch")

// ShapeError builds the error an op records for a bad argument.
func ShapeError(op string, format string, args ...any) error {
	return fmt.Errorf("%s: %w: %s", op, ErrShape, fmt.Sprintf(format, args...))
}

// Elems is the number of elements of a shape.
func Elems(shape []int) int {
	n := 1
	for _, d := range shape {
		n *= d
	}
	return n
}

// Rows and Cols view a tensor as a matrix: the last dimension is the row
// length, everything before it counts rows.
func Rows(t Tensor) int {
	s := t.Shape()
	if len(s) == 0 {
		return 1
	}
	return Elems(s[:len(s)-1])
}

// Cols is the length of the innermost dimension.
func Cols(t Tensor) int {
	s := t.Shape()
	if len(s) == 0 {
		return 1
	}
	return s[len(s)-1]
}
