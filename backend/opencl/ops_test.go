package opencl

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/glint-llm/glint/backend"
	"github.com/glint-llm/glint/backend/backendtest"
	"github.com/glint-llm/glint/backend/cpu"
	"github.com/glint-llm/glint/dtype"
)

// These tests run every kernel against backend/cpu on the same inputs, on
// shapes chosen to be awkward: row counts that are not multiples of the
// work-group size, heads narrower and wider than it, contexts that end
// inside a chunk. Tolerances are relative to the magnitude of the terms
// summed (Σ|a·b|), which bounds the rounding of any summation order in
// float32: the two backends sum in different orders and the CPU partly in
// float64.

var (
	cpuOnce sync.Once
	cpuB    *cpu.Backend
)

func cpuBackend() *cpu.Backend {
	cpuOnce.Do(func() { cpuB = newCPU() })
	return cpuB
}

// both holds one tensor on each backend.
type both struct{ c, o backend.Tensor }

type fixture struct {
	t   *testing.T
	c   *cpu.Backend
	o   *Backend
	rng *rand.Rand
	all []both
}

func newFixture(t *testing.T, o *Backend) *fixture {
	f := &fixture{t: t, c: cpuBackend(), o: o, rng: rand.New(rand.NewPCG(1, uint64(len(t.Name()))))}
	t.Cleanup(func() {
		for _, b := range f.all {
			f.c.Free(b.c)
			f.o.Free(b.o)
		}
	})
	return f
}

func (f *fixture) check() {
	f.t.Helper()
	if err := f.c.Sync(); err != nil {
		f.t.Fatalf("cpu: %v", err)
	}
	if err := f.o.Sync(); err != nil {
		f.t.Fatalf("opencl: %v", err)
	}
}

func (f *fixture) weight(dt dtype.Type, shape []int, data []byte) both {
	f.t.Helper()
	c, err := f.c.Weight("w", dt, shape, data)
	if err != nil {
		f.t.Fatal(err)
	}
	o, err := f.o.Weight("w", dt, shape, data)
	if err != nil {
		f.t.Fatal(err)
	}
	b := both{c, o}
	f.all = append(f.all, b)
	return b
}

func (f *fixture) f32(vals []float32, shape ...int) both {
	f.t.Helper()
	c, err := f.c.Alloc(dtype.F32, shape...)
	if err != nil {
		f.t.Fatal(err)
	}
	o, err := f.o.Alloc(dtype.F32, shape...)
	if err != nil {
		f.t.Fatal(err)
	}
	if vals != nil {
		if err := f.c.WriteF32(c, 0, vals); err != nil {
			f.t.Fatal(err)
		}
		if err := f.o.WriteF32(o, 0, vals); err != nil {
			f.t.Fatal(err)
		}
	}
	b := both{c, o}
	f.all = append(f.all, b)
	return b
}

func (f *fixture) i32(vals []int32, shape ...int) both {
	f.t.Helper()
	c, err := f.c.Alloc(dtype.I32, shape...)
	if err != nil {
		f.t.Fatal(err)
	}
	o, err := f.o.Alloc(dtype.I32, shape...)
	if err != nil {
		f.t.Fatal(err)
	}
	if vals != nil {
		if err := f.c.WriteI32(c, 0, vals); err != nil {
			f.t.Fatal(err)
		}
		if err := f.o.WriteI32(o, 0, vals); err != nil {
			f.t.Fatal(err)
		}
	}
	b := both{c, o}
	f.all = append(f.all, b)
	return b
}

func (f *fixture) rand(n int, lo, hi float32) []float32 {
	out := make([]float32, n)
	for i := range out {
		out[i] = lo + (hi-lo)*f.rng.Float32()
	}
	return out
}

// read returns count elements of both sides after syncing.
func (f *fixture) read(b both, count int) (c, o []float32) {
	f.t.Helper()
	f.check()
	c, o = make([]float32, count), make([]float32, count)
	if err := f.c.ReadF32(b.c, 0, c); err != nil {
		f.t.Fatal(err)
	}
	if err := f.o.ReadF32(b.o, 0, o); err != nil {
		f.t.Fatal(err)
	}
	return c, o
}

// close fails when |c-o| > tol·mag[i] + abs for some element (mag nil
// means |c|).
func (f *fixture) close(what string, c, o []float32, mag []float64, tol, abs float64) {
	f.t.Helper()
	for i := range c {
		m := math.Abs(float64(c[i]))
		if mag != nil {
			m = mag[i]
		}
		d := math.Abs(float64(c[i]) - float64(o[i]))
		if math.IsNaN(float64(o[i])) || d > tol*m+abs {
			f.t.Fatalf("%s: element %d: cpu %v, opencl %v (|Δ| %.3g, allowed %.3g)", what, i, c[i], o[i], d, tol*m+abs)
		}
	}
}

func randomWeight(rng *rand.Rand, dt dtype.Type, rows, cols int) []byte {
	size, err := dt.Bytes(rows, cols)
	if err != nil {
		panic(err)
	}
	out := make([]byte, size)
	switch dt {
	case dtype.F32:
		for i := 0; i < size; i += 4 {
			binary.LittleEndian.PutUint32(out[i:], math.Float32bits(2*rng.Float32()-1))
		}
		return out
	case dtype.F16, dtype.BF16:
		for i := 0; i < size; i += 2 {
			v := 2*rng.Float32() - 1
			h := dtype.F32ToF16(v)
			if dt == dtype.BF16 {
				h = dtype.F32ToBF16(v)
			}
			binary.LittleEndian.PutUint16(out[i:], h)
		}
		return out
	}
	for i := range out {
		out[i] = byte(rng.Uint32())
	}
	// Finite scales (and mins) of either sign keep every element finite.
	step := dt.BlockBytes()
	for b := 0; b < size; b += step {
		for _, at := range halfOffsets[dt] {
			s := (0.5 + rng.Float32()) / 64
			if rng.IntN(2) == 0 {
				s = -s
			}
			binary.LittleEndian.PutUint16(out[b+at:], dtype.F32ToF16(s))
		}
	}
	return out
}

// halfOffsets are the byte offsets of each block format's f16 fields (its
// scale d and, for Q4_1, Q5_1 and the K-quants with mins, its min), which
// random bytes could make infinite or NaN.
var halfOffsets = map[dtype.Type][]int{
	dtype.Q8_0: {0}, dtype.Q4_0: {0}, dtype.Q5_0: {0}, dtype.IQ4_NL: {0}, dtype.IQ4_XS: {0},
	dtype.Q4_1: {0, 2}, dtype.Q5_1: {0, 2}, dtype.Q4_K: {0, 2}, dtype.Q5_K: {0, 2},
	dtype.Q2_K: {80, 82}, dtype.Q3_K: {108}, dtype.Q6_K: {208},
}

// cols per type: odd for plain types, whole blocks (and not a power of two)
// for the block formats.
var matCols = map[dtype.Type]int{
	dtype.F32: 37, dtype.F16: 53, dtype.BF16: 45,
	dtype.Q8_0: 96, dtype.Q4_0: 160, dtype.Q6_K: 768,
	dtype.Q4_1: 96, dtype.Q5_0: 160, dtype.Q5_1: 352, dtype.IQ4_NL: 288,
	dtype.Q2_K: 768, dtype.Q3_K: 768, dtype.Q4_K: 768, dtype.Q5_K: 768, dtype.IQ4_XS: 768,
}

// otherVariant opens a Backend on b's device with the kernel variants and
// launch shapes of the other device class (see TestOtherVariants), closed
// when t ends.
func otherVariant(t *testing.T, b *Backend) *Backend {
	t.Helper()
	v := b.v
	v.cpu = !v.cpu
	b, err := open(deviceOf(b), v, testFlavour)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// TestMatMulTransposed runs each weight type's matmul on the device's own
// kernel variants and on the other device class's (mv with lanes per row
// and mmt's local-memory tiles where the device is a CPU).
func TestMatMulTransposed(t *testing.T) { eachDevice(t, testMatMulTransposed) }

func testMatMulTransposed(t *testing.T, dev *Backend) {
	other := otherVariant(t, dev)
	for _, wt := range weightTypes {
		for _, n := range []int{1, 3, 8, 17} {
			for _, v := range []string{"native", "other"} {
				t.Run(fmt.Sprintf("%v/n=%d/%s", wt.dt, n, v), func(t *testing.T) {
					f := newFixture(t, dev)
					if v == "other" {
						f.o = other
					}
					rows, cols := 67, matCols[wt.dt]
					data := randomWeight(f.rng, wt.dt, rows, cols)
					w := f.weight(wt.dt, []int{rows, cols}, data)
					xv := f.rand((n+1)*cols, -1, 1)
					x := f.f32(xv, n+1, cols)
					dst := f.f32(nil, n+1, rows)
					f.c.MatMulTransposed(dst.c, x.c, w.c, n)
					f.o.MatMulTransposed(dst.o, x.o, w.o, n)
					c, o := f.read(dst, (n+1)*rows)
					// The reference: weights dequantised, activations rounded
					// as every backend rounds them for this weight type.
					xr := make([]float32, len(xv))
					for i := range n {
						dtype.RoundActivations(wt.dt.ActivationType(), xr[i*cols:(i+1)*cols], xv[i*cols:(i+1)*cols])
					}
					// Q4_1 and Q5_1 add each block's min times the activations'
					// Q8_1 sum (dtype.Q8_1Sum), not times the sum of the rounded
					// activations: their weights are dequantised without the min
					// (zeroed in a copy), which mins adds back that way.
					wdata := data
					var mins func(r, b int) float64
					if wt.dt.ActivationType() == dtype.Q8_1 {
						wdata = append([]byte(nil), data...)
						bb := wt.dt.BlockBytes()
						for b := 0; b < len(wdata); b += bb {
							wdata[b+2], wdata[b+3] = 0, 0
						}
						mins = func(r, b int) float64 {
							return float64(dtype.F16ToF32(binary.LittleEndian.Uint16(data[(r*cols/32+b)*bb+2:])))
						}
					}
					wf := make([]float32, rows*cols)
					rb := len(data) / rows
					for r := range rows {
						dtype.DequantizeRow(wt.dt, wf[r*cols:(r+1)*cols], wdata[r*rb:(r+1)*rb])
					}
					want := make([]float32, (n+1)*rows)
					mag := make([]float64, (n+1)*rows)
					for i := range n {
						for r := range rows {
							var s float64
							for k := range cols {
								p := float64(xr[i*cols+k]) * float64(wf[r*cols+k])
								s += p
								mag[i*rows+r] += math.Abs(p)
							}
							for b := 0; mins != nil && b < cols/32; b++ {
								p := mins(r, b) * float64(dtype.Q8_1Sum(xv[i*cols+32*b:i*cols+32*b+32]))
								s += p
								mag[i*rows+r] += math.Abs(p)
							}
							want[i*rows+r] = float32(s)
						}
					}
					// Both backends round the activations bit for bit alike (with
					// or without the device's correctly rounded division), so
					// only float32 summation order separates them, and for the
					// block formats not even that: both follow ggml's order
					// operation for operation.
					f.close("matmul vs float64 reference", want, o, mag, 1e-6, 0)
					f.close("matmul", c, o, mag, 1e-6, 0)
					if wt.dt.Quantized() {
						for i := range n * rows {
							if math.Float32bits(c[i]) != math.Float32bits(o[i]) {
								t.Fatalf("element %d: cpu %v, opencl %v: not the same bits", i, c[i], o[i])
							}
						}
					}
					// Row n was not asked for and must stay zero.
					for r := range rows {
						if o[n*rows+r] != 0 {
							t.Fatalf("row %d (beyond n) written: %v", n, o[n*rows+r])
						}
					}
				})
			}
		}
	}
}

// TestMatMulLanesWide checks the lanes types' matmuls (quant.cl) bit for
// bit against the CPU backend on rows long enough that decode splits each
// over many work-items and chunks (the GPU variant's lanes), with an odd
// number of blocks (IQ4_NL's decode pairs them). Q4_0 runs on 41 rows
// (lanes) and on 48 (a multiple of 8: one accumulator, as ggml's repacked
// matrices).
func TestMatMulLanesWide(t *testing.T) { eachDevice(t, testMatMulLanesWide) }

func testMatMulLanesWide(t *testing.T, dev *Backend) {
	other := otherVariant(t, dev)
	type shape struct {
		dt   dtype.Type
		rows int
	}
	var shapes []shape
	for _, dt := range []dtype.Type{dtype.Q6_K, dtype.Q2_K, dtype.Q3_K, dtype.Q4_K, dtype.Q5_K, dtype.IQ4_XS,
		dtype.Q4_1, dtype.Q5_0, dtype.Q5_1, dtype.IQ4_NL, dtype.Q4_0} {
		shapes = append(shapes, shape{dt, 41})
	}
	shapes = append(shapes, shape{dtype.Q4_0, 48})
	for _, sh := range shapes {
		dt, rows := sh.dt, sh.rows
		cols := 256 * 13
		if dt.BlockSize() == 32 {
			cols = 32 * 71
		}
		for _, n := range []int{1, 5} {
			for _, v := range []string{"native", "other"} {
				t.Run(fmt.Sprintf("%v/rows=%d/n=%d/%s", dt, rows, n, v), func(t *testing.T) {
					f := newFixture(t, dev)
					if v == "other" {
						f.o = other
					}
					w := f.weight(dt, []int{rows, cols}, randomWeight(f.rng, dt, rows, cols))
					x := f.f32(f.rand((n+1)*cols, -1, 1), n+1, cols)
					dst := f.f32(nil, n+1, rows)
					f.c.MatMulTransposed(dst.c, x.c, w.c, n)
					f.o.MatMulTransposed(dst.o, x.o, w.o, n)
					c, o := f.read(dst, (n+1)*rows)
					// Row n, not asked for, must stay zero in both.
					for i := range c {
						if math.Float32bits(c[i]) != math.Float32bits(o[i]) {
							t.Fatalf("element %d: cpu %v, opencl %v: not the same bits", i, c[i], o[i])
						}
					}
				})
			}
		}
	}
}

func TestEmbedding(t *testing.T) { eachDevice(t, testEmbedding) }

func testEmbedding(t *testing.T, dev *Backend) {
	for _, wt := range weightTypes {
		t.Run(wt.dt.String(), func(t *testing.T) {
			f := newFixture(t, dev)
			vocab, cols := 11, matCols[wt.dt]
			data := randomWeight(f.rng, wt.dt, vocab, cols)
			table := f.weight(wt.dt, []int{vocab, cols}, data)
			ids := []int32{3, 0, 10, 3, 7}
			idt := f.i32(ids, len(ids))
			dst := f.f32(nil, len(ids), cols)
			f.c.Embedding(dst.c, table.c, idt.c, len(ids))
			f.o.Embedding(dst.o, table.o, idt.o, len(ids))
			c, o := f.read(dst, len(ids)*cols)
			// Dequantisation is one product per element in both: exact.
			rb := len(data) / vocab
			want := make([]float32, cols)
			for i, id := range ids {
				dtype.DequantizeRow(wt.dt, want, data[int(id)*rb:(int(id)+1)*rb])
				for k := range cols {
					if o[i*cols+k] != want[k] || c[i*cols+k] != want[k] {
						t.Fatalf("row %d (id %d) element %d: opencl %v, cpu %v, reference %v", i, id, k, o[i*cols+k], c[i*cols+k], want[k])
					}
				}
			}
		})
	}
}

func TestRMSNorm(t *testing.T) { eachDevice(t, testRMSNorm) }

func testRMSNorm(t *testing.T, dev *Backend) {
	f := newFixture(t, dev)
	for _, cols := range []int{197, 2048, 8192} {
		n := 3
		x := f.f32(f.rand((n+1)*cols, -3, 3), n+1, cols)
		w := f.f32(f.rand(cols, 0.5, 1.5), cols)
		dst := f.f32(nil, n+1, cols)
		f.c.RMSNorm(dst.c, x.c, w.c, n, 1e-5)
		f.o.RMSNorm(dst.o, x.o, w.o, n, 1e-5)
		c, o := f.read(dst, n*cols)
		// Both follow ggml's operations (a double sum of float squares,
		// exact or within 2⁻⁵³ in any order, or on a device without fp64
		// a float-float sum as near): the same bits.
		f.close(fmt.Sprintf("rmsnorm %d", cols), c, o, nil, 0, 0)
	}
}

func TestRoPE(t *testing.T) { eachDevice(t, testRoPE) }

func testRoPE(t *testing.T, dev *Backend) {
	cases := []struct {
		neox, freqs bool
		dims, pos0  int
	}{
		{false, false, 16, 0},
		{true, false, 16, 5},
		{false, true, 16, 1000},
		{true, true, 12, 100000}, // partial: 12 of 16 dims rotate
		{false, false, 10, 131000},
	}
	for _, tc := range cases {
		t.Run(fmt.Sprintf("neox=%v/freqs=%v/dims=%d/pos=%d", tc.neox, tc.freqs, tc.dims, tc.pos0), func(t *testing.T) {
			f := newFixture(t, dev)
			n, heads, hd := 3, 5, 16
			x := f.f32(f.rand(n*heads*hd, -2, 2), n, heads*hd)
			r := backend.Rope{Dims: tc.dims, Theta: 500000, NeoX: tc.neox}
			var rc, ro backend.Rope = r, r
			if tc.freqs {
				fr := f.f32(f.rand(tc.dims/2, 1, 8), tc.dims/2)
				rc.Freqs, ro.Freqs = fr.c, fr.o
			}
			pos := f.i32([]int32{int32(tc.pos0), int32(tc.pos0 + 7), int32(tc.pos0 / 3)}, n)
			f.c.RoPE(x.c, n, heads, hd, pos.c, rc)
			f.o.RoPE(x.o, n, heads, hd, pos.o, ro)
			c, o := f.read(x, n*heads*hd)
			// Both follow ggml's float arithmetic and take cos and sin
			// from the C library (OpenCL through its table): the same bits.
			f.close("rope", c, o, nil, 0, 0)

		})
	}
}

func TestRoPETable(t *testing.T) { eachDevice(t, testRoPETable) }

// testRoPETable turns random heads at positions that grow RoPE's table of
// cos and sin three times, upwards and (a K-shift's deltas) below 0, and
// checks every call against the CPU backend's bits: positions from −3000
// to 40000, every pair of a 128-wide head, Llama 3's frequency factors.
func testRoPETable(t *testing.T, dev *Backend) {
	f := newFixture(t, dev)
	const heads, hd, n = 2, 128, 256
	rng := rand.New(rand.NewPCG(7, 8))
	fr := f.f32(f.rand(hd/2, 1, 8), hd/2)
	r := backend.Rope{Dims: hd, Theta: 500000}
	rc, ro := r, r
	rc.Freqs, ro.Freqs = fr.c, fr.o
	for _, span := range [][2]int{{0, 100}, {0, 5000}, {-3000, 40000}, {0, 300}} {
		pos := make([]int32, n)
		for i := range pos {
			pos[i] = int32(span[0] + rng.IntN(span[1]-span[0]))
		}
		x := f.f32(f.rand(n*heads*hd, -2, 2), n, heads*hd)
		pt := f.i32(pos, n)
		f.c.RoPE(x.c, n, heads, hd, pt.c, rc)
		f.o.RoPE(x.o, n, heads, hd, pt.o, ro)
		c, o := f.read(x, n*heads*hd)
		f.close(fmt.Sprintf("rope at positions in [%d, %d)", span[0], span[1]), c, o, nil, 0, 0)
	}
}

func TestElementwise(t *testing.T) { eachDevice(t, testElementwise) }

func testElementwise(t *testing.T, dev *Backend) {
	// Rows of whole vectors (silu_mul) and not (silu_mul_rows).
	for _, cols := range []int{128, 131} {
		f := newFixture(t, dev)
		n := 5
		av := f.rand((n+1)*cols, -8, 8)
		// Gates where ggml's exp leaves its main range (|x·log2 e| > 126,
		// > 192) or underflows, and zeros of both signs.
		copy(av, []float32{-200, -140, -130, -100, -88, -87, 87, 88, 100, 130, 200, 0, float32(math.Copysign(0, -1)), 1e-30, -1e-30})
		a := f.f32(av, n+1, cols)
		b := f.f32(f.rand((n+1)*cols, -2, 2), n+1, cols)
		dst := f.f32(nil, n+1, cols)
		f.c.SiLUMul(dst.c, a.c, b.c, n)
		f.o.SiLUMul(dst.o, a.o, b.o, n)
		c, o := f.read(dst, (n+1)*cols)
		// Both compute the float operations of the llama.cpp build the CPU
		// backend follows (numerics.Flavour): its vectorised exp, a correctly
		// rounded division, the same bits. A row's last cols%lanes elements
		// take the C library's expf on the CPU and float64's exp rounded
		// (or OpenCL's exp) here, which may differ by an ulp (three
		// through the division and the product).
		vec := cols - cols%f.o.flavour.Lanes()
		for i := range n * cols {
			if i%cols < vec && math.Float32bits(c[i]) != math.Float32bits(o[i]) {
				t.Fatalf("silu_mul, %d columns: element %d: cpu %v, opencl %v: not the same bits", cols, i, c[i], o[i])
			}
		}
		f.close("silu_mul", c, o, nil, 0x1p-22, 0x1p-126)

		// Add in place, dst aliasing a: exact.
		f.c.Add(a.c, a.c, b.c, n)
		f.o.Add(a.o, a.o, b.o, n)
		c, o = f.read(a, (n+1)*cols)
		f.close("add", c, o, nil, 0, 0)
	}
}

func TestCopySlice(t *testing.T) { eachDevice(t, testCopySlice) }

func testCopySlice(t *testing.T, dev *Backend) {
	f := newFixture(t, dev)
	src := f.f32(f.rand(4*10, -1, 1), 4, 10)
	cache := f.f32(nil, 7, 3, 4)
	f.c.CopySlice(cache.c, 2*12+5, src.c, 7, 19)
	f.o.CopySlice(cache.o, 2*12+5, src.o, 7, 19)
	c, o := f.read(cache, 7*12)
	f.close("copy_slice", c, o, nil, 0, 0)
}

// view uploads v to both backends.
func (f *fixture) view(v backendtest.View) (c, o backend.KVView) {
	f.t.Helper()
	var err error
	if c, err = v.Upload(f.c); err == nil {
		o, err = v.Upload(f.o)
	}
	if err != nil {
		f.t.Fatal(err)
	}
	f.all = append(f.all, both{c.Rows, o.Rows}, both{c.Cells, o.Cells})
	return c, o
}

func TestAttention(t *testing.T) { eachDevice(t, testAttention) }

func testAttention(t *testing.T, dev *Backend) {
	type shape struct{ heads, kvHeads, hd int }
	shapes := []shape{{6, 2, 40}, {4, 4, 16}, {3, 1, 80}}
	for _, s := range shapes {
		for _, kvLen := range []int{1, 2, 33, 1000} {
			t.Run(fmt.Sprintf("gen/h%d/kv%d/d%d/len%d", s.heads, s.kvHeads, s.hd, kvLen), func(t *testing.T) {
				f := newFixture(t, dev)
				maxSeq := kvLen + 3
				cols, kvCols := s.heads*s.hd, s.kvHeads*s.hd
				q := f.f32(f.rand(cols, -1, 1), cols)
				k := f.f32(f.rand(maxSeq*kvCols, -1, 1), maxSeq, s.kvHeads, s.hd)
				v := f.f32(f.rand(maxSeq*kvCols, -1, 1), maxSeq, s.kvHeads, s.hd)
				out := f.f32(nil, cols)
				a := backend.Attn{Heads: s.heads, KVHeads: s.kvHeads, HeadDim: s.hd, Scale: float32(1 / math.Sqrt(float64(s.hd)))}
				vc, vo := f.view(backendtest.Causal(1, kvLen-1))
				f.c.Attention(out.c, q.c, k.c, v.c, 1, vc, a)
				f.o.Attention(out.o, q.o, k.o, v.o, 1, vo, a)
				c, o := f.read(out, cols)
				// Outputs are convex combinations of values in [-1, 1].
				f.close("attention decode", c, o, nil, 0, 2e-6)
			})
		}
		for _, p := range [][2]int{{5, 0}, {7, 30}, {3, 300}, {300, 0}} {
			n, pos0 := p[0], p[1]
			t.Run(fmt.Sprintf("prefill/h%d/kv%d/d%d/n%d/pos%d", s.heads, s.kvHeads, s.hd, n, pos0), func(t *testing.T) {
				f := newFixture(t, dev)
				maxSeq := pos0 + n + 2
				cols, kvCols := s.heads*s.hd, s.kvHeads*s.hd
				q := f.f32(f.rand(n*cols, -1, 1), n, cols)
				k := f.f32(f.rand(maxSeq*kvCols, -1, 1), maxSeq, s.kvHeads, s.hd)
				v := f.f32(f.rand(maxSeq*kvCols, -1, 1), maxSeq, s.kvHeads, s.hd)
				out := f.f32(nil, n, cols)
				a := backend.Attn{Heads: s.heads, KVHeads: s.kvHeads, HeadDim: s.hd, Scale: float32(1 / math.Sqrt(float64(s.hd)))}
				vc, vo := f.view(backendtest.Causal(n, pos0))
				f.c.Attention(out.c, q.c, k.c, v.c, n, vc, a)
				f.o.Attention(out.o, q.o, k.o, v.o, n, vo, a)
				c, o := f.read(out, n*cols)
				f.close("attention", c, o, nil, 0, 2e-6)
			})
		}
	}
}

// TestAttentionBits requires the CPU backend's bits of OpenCL's attention
// (attention.cl follows the same llama.cpp build's operations, see
// numerics.Flavour): decode and prefill, every pair of cache types, head sizes
// that take each path (vec_dot's remainder 9, 30, 36; tinyBLAS's scores
// and V 16, 64, 80; 40, whose prefill V is tinyBLAS's but scores vec_dot's
// on AVX2), ranges within one chunk of cells and across several, views of
// several sequences and a window. Soft capping (OpenCL's tanh) and the
// flash-decoding split are TestAttention's and TestAttentionSplit's.
// Without fp64 the softmax sum is a float pair, which may round otherwise
// (rarely): there the tolerance of TestAttention applies.
func TestAttentionBits(t *testing.T) { eachDevice(t, testAttentionBits) }

func testAttentionBits(t *testing.T, dev *Backend) {
	views := []struct {
		name   string
		view   backendtest.View
		window int
	}{
		{"decode1", backendtest.Causal(1, 0), 0}, {"decode41", backendtest.Causal(1, 40), 0},
		{"decode270", backendtest.Causal(1, 269), 0}, {"prefill5", backendtest.Causal(5, 0), 0},
		{"prefill7+30", backendtest.Causal(7, 30), 0}, {"prefill3+300", backendtest.Causal(3, 300), 0},
		{"interleaved", interleaved(200, 3, 1, 0, 200), 0}, {"subrange", interleaved(300, 2, 0, 100, 300), 0},
		{"window", backendtest.Causal(6, 90), 33},
		// Rows that scan the same cells, which attention_K_V tiles.
		{"prompt9+30", backendtest.Prompt(9, 30), 0}, {"prompt20+250", backendtest.Prompt(20, 250), 0},
		{"prompt window", backendtest.Prompt(12, 60), 17},
	}
	shapes := []struct{ heads, kvHeads, hd int }{{4, 2, 9}, {4, 2, 30}, {6, 2, 36}, {4, 2, 40}, {4, 4, 16}, {4, 1, 64}, {3, 1, 80}}
	types := []dtype.Type{dtype.F32, dtype.F16}
	for _, s := range shapes {
		for _, vw := range views {
			for _, kt := range types {
				for _, vt := range types {
					name := fmt.Sprintf("h%d/kv%d/d%d/%s/K%v/V%v", s.heads, s.kvHeads, s.hd, vw.name, kt, vt)
					t.Run(name, func(t *testing.T) {
						f := newFixture(t, dev)
						f.o.attnParts = 1
						defer func() { f.o.attnParts = 0 }()
						n, cells := vw.view.N(), vw.view.Hi
						cols, kvCols := s.heads*s.hd, s.kvHeads*s.hd
						q := f.f32(f.rand(n*cols, -3, 3), n, cols)
						k := f.cache(kt, f.rand(cells*kvCols, -1, 1), cells, s.kvHeads, s.hd)
						v := f.cache(vt, f.rand(cells*kvCols, -1, 1), cells, s.kvHeads, s.hd)
						out := f.f32(nil, n, cols)
						a := backend.Attn{Heads: s.heads, KVHeads: s.kvHeads, HeadDim: s.hd,
							Scale: float32(1 / math.Sqrt(float64(s.hd))), Window: vw.window}
						vc, vo := f.view(vw.view)
						f.c.Attention(out.c, q.c, k.c, v.c, n, vc, a)
						f.o.Attention(out.o, q.o, k.o, v.o, n, vo, a)
						c, o := f.read(out, n*cols)
						if !f.o.Info().FP64 {
							f.close("attention", c, o, nil, 0, 4e-6)
							return
						}
						bad := 0
						for i := range c {
							if math.Float32bits(c[i]) != math.Float32bits(o[i]) {
								if bad++; bad <= 5 {
									t.Errorf("out[%d]: cpu %g, opencl %g: the bits must agree", i, c[i], o[i])
								}
							}
						}
					})
				}
			}
		}
	}
}

// cache allocates a cache tensor of type dt on both backends holding vals
// (rounded to F16 as the cache append rounds them).
func (f *fixture) cache(dt dtype.Type, vals []float32, shape ...int) both {
	f.t.Helper()
	src := f.f32(vals, len(vals))
	c, err := f.c.Alloc(dt, shape...)
	if err != nil {
		f.t.Fatal(err)
	}
	o, err := f.o.Alloc(dt, shape...)
	if err != nil {
		f.t.Fatal(err)
	}
	f.c.CopySlice(c, 0, src.c, 0, len(vals))
	f.o.CopySlice(o, 0, src.o, 0, len(vals))
	b := both{c, o}
	f.all = append(f.all, b)
	return b
}

func TestArgmax(t *testing.T) { eachDevice(t, testArgmax) }

func testArgmax(t *testing.T, dev *Backend) {
	f := newFixture(t, dev)
	n, cols := 4, 1001
	vals := f.rand(n*cols, -20, 20)
	// Row 1: a tie for the maximum, the first must win. Row 2: all equal.
	vals[1*cols+17], vals[1*cols+900] = 30, 30
	for k := range cols {
		vals[2*cols+k] = -1
	}
	vals[3*cols+cols-1] = 25
	x := f.f32(vals, n, cols)
	idx := f.i32(nil, n)
	f.c.Argmax(idx.c, x.c, n)
	f.o.Argmax(idx.o, x.o, n)
	f.check()
	gc, got := make([]int32, n), make([]int32, n)
	if err := f.c.ReadI32(idx.c, 0, gc); err != nil {
		t.Fatal(err)
	}
	if err := f.o.ReadI32(idx.o, 0, got); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		want := int32(0)
		for k := range cols {
			if vals[i*cols+k] > vals[i*cols+int(want)] {
				want = int32(k)
			}
		}
		if got[i] != want || gc[i] != want {
			t.Fatalf("argmax row %d: opencl %d, cpu %d, want %d", i, got[i], gc[i], want)
		}
	}
}
