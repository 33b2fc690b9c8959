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
	"math"

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
	// FreqScale, when neither 0 nor 1, multiplies every angle (linear
	// scaling, 1/factor: Gemma 3's global layers from 4B up).
	FreqScale float32
	// AttnFactor, when neither 0 nor 1, multiplies cos and sin (LongRoPE's
	// attention factor, ggml's mscale: Phi-3.5, Phi-3 128k).
	AttnFactor float32
}

// Scales returns FreqScale and AttnFactor with 0 read as 1 (ggml applies
// both always; a product by 1 is exact), and whether both are finite and
// not negative.
func (r Rope) Scales() (freqScale, attnFactor float32, ok bool) {
	freqScale, attnFactor = r.FreqScale, r.AttnFactor
	if freqScale == 0 {
		freqScale = 1
	}
	if attnFactor == 0 {
		attnFactor = 1
	}
	ok = freqScale > 0 && attnFactor > 0 && !math.IsInf(float64(freqScale), 0) && !math.IsInf(float64(attnFactor), 0)
	return freqScale, attnFactor, ok
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
	// MatMulDecode is MatMulTransposed with every row in a decode step's
	// arithmetic: row i gets the bits MatMulTransposed gives it as a lone row
	// (n = 1), whatever the other rows. A matmul of several rows may sum in
	// another order (tinyBLAS's for float weights, a GEMM on a device);
	// speculative verification, whose drafted rows must give plain
	// decoding's bits, takes this one (with KVView.Decode).
	MatMulDecode(dst, x, w Tensor, n int)
	// RMSNorm computes dst[i, :] = x[i, :] / sqrt(mean(x[i, :]²) + eps) · w.
	// w may also be shorter than a row, of a length k dividing it: then each
	// run of k elements is normalised on its own (the per-head Q/K norms of
	// Qwen 3 and Gemma 3: x [n, heads·headDim] with w [headDim]).
	RMSNorm(dst, x, w Tensor, n int, eps float32)
	// LayerNorm computes dst[i, :] = (x[i, :] − μ)/sqrt(σ² + eps) · w + b,
	// μ and σ² the row's mean and variance (GPT-2). b may be nil (no bias).
	LayerNorm(dst, x, w, b Tensor, n int, eps float32)
	// RoPE rotates, in place, the heads of x ([n, heads·headDim]): row i by
	// the position pos[i] (pos is I32 with at least n entries). Positions
	// may be any int32s in any order: a batch mixes sequences, and a K-shift
	// rotates cached keys by a (negative) delta, as llama.cpp's does.
	RoPE(x Tensor, n, heads, headDim int, pos Tensor, r Rope)
	// SiLUMul computes dst = silu(gate) · up elementwise (SwiGLU).
	SiLUMul(dst, gate, up Tensor, n int)
	// GELUMul computes dst = gelu(gate) · up elementwise (GeGLU), gelu as
	// GELU computes it.
	GELUMul(dst, gate, up Tensor, n int)
	// GELU computes dst = gelu(x), the tanh approximation as llama.cpp's CPU
	// build computes it: x rounded to f16 and looked up in ggml's table of
	// f16 results (0 at or below −10, x at or above 10).
	GELU(dst, x Tensor, n int)
	// Add computes dst = a + b elementwise (dst may be a or b).
	Add(dst, a, b Tensor, n int)
	// AddBias computes dst[i, :] = x[i, :] + bias for each of the first n
	// rows (dst may be x); bias is F32 [cols].
	AddBias(dst, x, bias Tensor, n int)
	// Scale computes dst = x · s elementwise (dst may be x).
	Scale(dst, x Tensor, n int, s float32)
	// SoftCap computes, in place, x = c·tanh(x/c) (Gemma 2's final-logit
	// soft-capping), as ggml's graph does: x·(1/c), tanhf, ·c.
	SoftCap(x Tensor, n int, c float32)
	// CopySlice copies count elements from src at element srcOff to dst at
	// element dstOff (the KV-cache append). src and dst have one type, or src
	// is F32 and dst F16 (an f16 KV cache): each value then rounds to the
	// nearest f16, ties to even, as ggml's F32→F16 copy does; or src is F16
	// and dst F32, which widens exactly (an f16 cache read back for a
	// K-shift); or src is F32 and dst a quantised cache type (BF16, Q8_0,
	// Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL), offsets and count whole blocks, each
	// block quantised as llama.cpp stores a cache row (its from_float), or
	// the reverse, which dequantises (a K-shift over a quantised K).
	CopySlice(dst Tensor, dstOff int, src Tensor, srcOff, count int)
	// Attention computes, for each of the first n query rows of q
	// ([n, Heads·HeadDim]), softmax(q·Kᵀ·Scale)·V over the cache cells kv
	// lets the row see (see KVView), written to out ([n, Heads·HeadDim]).
	// k and v are the caches, [cells, KVHeads, HeadDim], each F32 or F16;
	// query head h reads KV head h/(Heads/KVHeads) (grouped-query
	// attention). The arithmetic is llama.cpp's (ggml_mul_mat of K and q,
	// ggml_soft_max_ext with its −∞ mask, ggml_mul_mat of V and the
	// probabilities): over an F16 K the query is rounded to f16 before the
	// dot products; a score is soft-capped (Attn.SoftCap), then scaled; the
	// softmax runs in float32 and normalises before V is weighted; over an
	// F16 V each probability is rounded to f16 first. A cell the row does
	// not see contributes nothing; a row that sees no cell gets zeros. A row
	// whose sequence has other rows in the call takes ggml's prefill
	// arithmetic, a lone row of its sequence a decode step's (every row
	// does with KVView.Decode), so that a row's bits do not depend on the
	// other sequences batched with it.
	Attention(out, q, k, v Tensor, n int, kv KVView, a Attn)
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

// Attn is one attention call's geometry and options.
type Attn struct {
	Heads, KVHeads, HeadDim int
	Scale                   float32
	// SoftCap, when > 0, turns a score s = q·k into SoftCap·tanh(s/SoftCap)
	// before Scale applies (Gemma 2, as llama.cpp's graph does it: s times
	// the float32 1/SoftCap, tanhf, times SoftCap).
	SoftCap float32
	// Window, when > 0, is a sliding window: a query at position p sees
	// only cells at positions > p−Window (llama.cpp's n_swa rule).
	Window int
	// Flash selects flash attention: llama.cpp's flash_attn_ext arithmetic
	// (online softmax over tiles of cells, the query converted to K's
	// vec_dot_type, V accumulated as llama.cpp accumulates it for V's type)
	// in place of the mul_mat/soft_max/mul_mat graph. A quantised V cache
	// needs it, as in llama.cpp.
	Flash bool
}

// KVView says which cache cells each query row of an Attention call
// attends to. Row i sees cell j ∈ [lo_i, hi_i) iff the cell's sequence set
// holds the row's sequence, the cell's position is ≤ the row's, and, with a
// Window, the row's position minus the cell's is < Window. The cells a row
// does not see are llama.cpp's −∞ mask entries: they add nothing, but they
// keep their place in the row's range [lo_i, hi_i), which is the view whose
// lanes a backend's float sums follow (llama.cpp's K view starts at cell 0
// and holds n_kv cells; give a row that range to reproduce its sums).
type KVView struct {
	// Rows is I32 [≥ n, 4]: per query row its position, its sequence id
	// (0…63), and the cell range [lo, hi) it scans.
	Rows Tensor
	// Cells is I32 [≥ Hi, 3]: per cell its position and its sequence set as
	// a 64-bit mask (low word, high word; bit s is sequence s); 0 = empty.
	Cells Tensor
	// Lo and Hi bound every row's range, Lo ≤ lo_i ≤ hi_i ≤ Hi ≤ cells of
	// the caches and of Cells, so that a device backend sizes its launch
	// without reading Rows back. A row outside them, or with a sequence id
	// outside 0…63, is a recorded error (a device backend finds it on the
	// device and reports it at Sync).
	Lo, Hi int
	// Decode makes every row take a decode step's arithmetic, as if its
	// sequence had been decoded one token at a time (speculative
	// verification: a sequence's drafted rows give the bits plain
	// decoding would). Without it a row whose sequence has other rows in
	// the call takes the prefill arithmetic.
	Decode bool
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
