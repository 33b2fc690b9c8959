package cpu

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/glint-llm/glint/backend"
	"github.com/glint-llm/glint/backend/backendtest"
	"github.com/glint-llm/glint/dtype"
)

func TestConformance(t *testing.T) {
	for _, threads := range []int{1, 3} {
		t.Run(fmt.Sprintf("threads=%d", threads), func(t *testing.T) {
			backendtest.Run(t, func(t *testing.T) backend.Backend { return New(threads) })
		})
	}
}

// TestF16Table checks every half-precision bit pattern against the dtype
// reference conversion (NaNs compared as NaN).
func TestF16Table(t *testing.T) {
	for i := range 1 << 16 {
		got, want := f16Table[i], dtype.F16ToF32(uint16(i))
		if math.Float32bits(got) != math.Float32bits(want) && !(math.IsNaN(float64(got)) && math.IsNaN(float64(want))) {
			t.Fatalf("f16Table[%#04x] = %g, want %g", i, got, want)
		}
	}
}

// TestDotKernels compares each float row kernel with a float64 dot product over the
// dtype reference dequantisation, and dequant with DequantizeRow bit for bit.
func TestDotKernels(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	for _, dt := range backendtest.WeightTypes {
		for _, blocks := range []int{1, 3} {
			k := blocks * max(dt.BlockSize(), 37)
			if dt.Quantized() {
				k = blocks * dt.BlockSize()
			}
			raw := backendtest.RandomWeight(t, rng, dt, 1, k)
			ref := make([]float32, k)
			dtype.DequantizeRow(dt, ref, raw)
			got := make([]float32, k)
			embedRow(dt, got, raw)
			for i := range ref {
				if got[i] != ref[i] {
					t.Fatalf("%v embedRow[%d] = %g, want %g", dt, i, got[i], ref[i])
				}
			}
			if dt.Quantized() {
				continue // quantised dots: TestDotQ
			}
			x := make([]float32, k)
			for i := range x {
				x[i] = 2*rng.Float32() - 1
			}
			var want, mag float64
			for i := range x {
				want += float64(x[i]) * float64(ref[i])
				mag += math.Abs(float64(x[i]) * float64(ref[i]))
			}
			var wf []float32
			if dt == dtype.F32 {
				wf = ref
			}
			if d := dot(dt, x, raw, wf); math.Abs(float64(d)-want) > 1e-6*mag {
				t.Errorf("%v k=%d: dot = %g, want %g (Σ|x·w| %g)", dt, k, d, want, mag)
			}
		}
	}
}

// TestWeightCopy checks that quantised weights are copied into memory the
// backend owns (huge-page aligned when large), that F32 weights are
// referenced, and that a misaligned F32 weight is still read correctly.
func TestWeightCopy(t *testing.T) {
	b := New(1)
	defer b.Close()
	for _, rows := range []int{2, hugePage/dtype.BlockBytesQ8_0/2 + 3} {
		data := make([]byte, 2*rows*dtype.BlockBytesQ8_0)
		for i := range data {
			data[i] = byte(i * 7)
		}
		w, err := b.Weight("w", dtype.Q8_0, []int{rows, 64}, data)
		if err != nil {
			t.Fatal(err)
		}
		got := w.(*Tensor).data
		if &got[0] == &data[0] || !bytes.Equal(got, data) {
			t.Errorf("%d rows: Q8_0 weight is not an equal copy", rows)
		}
		if big := len(data) >= hugePage; big != (w.(*Tensor).mem != nil) || big && addrOf(got)%hugePage != 0 {
			t.Errorf("%d rows (%d bytes): mem %v at %#x, want a huge-page-aligned mapping iff >= %d bytes",
				rows, len(data), w.(*Tensor).mem != nil, addrOf(got), hugePage)
		}
		mem := w.(*Tensor).mem
		b.Free(w)
		if err := b.Err(); err != nil {
			t.Fatal(err)
		}
		if mem != nil && mem.data != nil {
			t.Errorf("%d rows: Free kept the copy", rows)
		}
	}
	norm := make([]byte, 8)
	wn, err := b.Weight("norm", dtype.F32, []int{2}, norm)
	if err != nil {
		t.Fatal(err)
	}
	if &wn.(*Tensor).data[0] != &norm[0] {
		t.Error("aligned F32 weight copied its data")
	}
	buf := make([]byte, 4*3+1)
	vals := []float32{1.5, -2, 3.25}
	for i, v := range vals {
		binary.LittleEndian.PutUint32(buf[1+4*i:], math.Float32bits(v))
	}
	wf, err := b.Weight("f", dtype.F32, []int{3}, buf[1:])
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range vals {
		if got := wf.(*Tensor).f32[i]; got != v {
			t.Errorf("misaligned F32 weight[%d] = %g, want %g", i, got, v)
		}
	}
}

// TestSticky checks the CPU-specific promise beyond the suite: after a
// failure, ops do nothing at all.
func TestSticky(t *testing.T) {
	b := New(2)
	defer b.Close()
	x, _ := b.Alloc(dtype.F32, 2, 4)
	y, _ := b.Alloc(dtype.F32, 2, 5)
	if err := b.WriteF32(x, 0, []float32{1, 2, 3, 4, 5, 6, 7, 8}); err != nil {
		t.Fatal(err)
	}
	b.Add(x, x, y, 1)
	if !errors.Is(b.Err(), backend.ErrShape) {
		t.Fatalf("Err() = %v, want ErrShape", b.Err())
	}
	b.Add(x, x, x, 2)
	got := make([]float32, 8)
	if err := b.ReadF32(x, 0, got); err != nil {
		t.Fatal(err)
	}
	if got[0] != 1 || got[7] != 8 {
		t.Errorf("op after failure changed data: %v", got)
	}
}

func TestForeignAndFreed(t *testing.T) {
	a, b := New(1), New(1)
	defer a.Close()
	defer b.Close()
	x, _ := a.Alloc(dtype.F32, 4)
	y, _ := b.Alloc(dtype.F32, 4)
	a.Add(x, x, y, 1)
	if !errors.Is(a.Err(), errForeign) {
		t.Errorf("foreign tensor: Err() = %v", a.Err())
	}
	c := New(1)
	defer c.Close()
	z, _ := c.Alloc(dtype.F32, 4)
	c.Free(z)
	c.Add(z, z, z, 1)
	if !errors.Is(c.Err(), errFreed) {
		t.Errorf("freed tensor: Err() = %v", c.Err())
	}
	if err := c.WriteF32(z, 0, []float32{1}); !errors.Is(err, errFreed) {
		t.Errorf("WriteF32 to freed tensor: %v", err)
	}
}

func TestDevice(t *testing.T) {
	b := New(0)
	defer b.Close()
	t.Log(b.Device())
	if b.Name() != "cpu" || b.Threads() < 1 || b.Device() == "" {
		t.Errorf("Name %q Threads %d Device %q", b.Name(), b.Threads(), b.Device())
	}
}

// BenchmarkDot times each row kernel alone on one thread (a 2048-element row,
// as in the Llama 3.2 1B projections), the unit a SIMD pass would replace.
// Quantised types include quantising the activation row, as a decode does.
func BenchmarkDot(b *testing.B) {
	rng := rand.New(rand.NewPCG(5, 5))
	const k = 2048
	x := make([]float32, k)
	for i := range x {
		x[i] = 2*rng.Float32() - 1
	}
	for _, dt := range backendtest.WeightTypes {
		raw := backendtest.RandomWeight(b, rng, dt, 1, k)
		wf := make([]float32, k)
		dtype.DequantizeRow(dt, wf, raw)
		b.Run(dt.String(), func(b *testing.B) {
			b.SetBytes(int64(len(raw)))
			var s float32
			var a acts
			at := dt.ActivationType()
			a.grow(at, 1, k, false, false)
			for range b.N {
				if dt.Quantized() {
					quantizeRowsGo(at, actOffset(dt), &a, x, k, 0, 1)
					s += dotQ(dt, &a, 0, k, raw, 1, a.n > 1)
				} else {
					s += dot(dt, x, raw, wf)
				}
			}
			sink = s
		})
	}
	buf := make([]float32, chunkElems)
	for _, dt := range backendtest.WeightTypes {
		raw := backendtest.RandomWeight(b, rng, dt, 1, chunkElems)
		b.Run("dequant/"+dt.String(), func(b *testing.B) {
			b.SetBytes(int64(len(raw)))
			for range b.N {
				dequant(dt, buf, raw)
			}
		})
	}
}

var sink float32

// TestCloseReleasesWeights checks that Close returns every weight copy that
// Free did not, and that a later Free of such a weight is harmless.
func TestCloseReleasesWeights(t *testing.T) {
	b := New(2)
	rows := hugePage/(2*dtype.BlockBytesQ8_0) + 1
	w, err := b.Weight("w", dtype.Q8_0, []int{rows, 64}, make([]byte, 2*rows*dtype.BlockBytesQ8_0))
	if err != nil {
		t.Fatal(err)
	}
	mem := w.(*Tensor).mem
	if mem == nil {
		t.Fatal("large weight has no backend-owned copy")
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if mem.data != nil {
		t.Error("Close kept a weight copy")
	}
	b.Free(w)
	if err := b.Err(); err != nil {
		t.Errorf("Free after Close: %v", err)
	}
}

// TestDecodeSplitInvariant checks that how a decode matmul's rows fall to
// threads (chunks claimed in turn) changes no result: 2 and 3 threads, at
// every kernel level, give a one-thread backend's bits, on a row count that
// no chunk or tile divides.
func TestDecodeSplitInvariant(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	const m, k = 301, 256
	for _, dt := range []dtype.Type{dtype.Q4_0, dtype.F16} {
		raw := backendtest.RandomWeight(t, rng, dt, m, k)
		x := make([]float32, k)
		for i := range x {
			x[i] = 2*rng.Float32() - 1
		}
		for _, l := range simdLevels() {
			want := matMulAt(t, l, 1, dt, raw, m, k, 1, x)
			for _, threads := range []int{2, 3} {
				got := matMulAt(t, l, threads, dt, raw, m, k, 1, x)
				for o := range got {
					if math.Float32bits(got[o]) != math.Float32bits(want[o]) {
						t.Fatalf("%v, level %v, %d threads: row %d = %v, one thread %v", dt, l, threads, o, got[o], want[o])
					}
				}
			}
		}
	}
}

// dot is one decode output of the portable float kernels: x · the weight
// row raw (F32: wf, its values).
func dot(dt dtype.Type, x []float32, raw []byte, wf []float32) float32 {
	var d [1]float32
	t := &task{kind: kMatMul, dst: d[:], x: x, w: raw, y: wf, wt: dt, n: 1, k: len(x), m: 1,
		sum: flavour.FloatOrder(dt, 1, len(x), 1)}
	matMulRows(t, 0, 1)
	return d[0]
}
