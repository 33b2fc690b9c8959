package backendtest

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/glint-llm/glint/dtype"
)

// The naive references: plain float64 loops over dequantised weights, written
// for obviousness rather than speed. Each returns the expected values and,
// where rounding depends on magnitudes, the scale a tolerance is relative to.

// RandomWeight returns rows×cols random elements stored as dt. Plain types
// hold uniform values in [-1, 1]. Quantised blocks get random quant bytes
// (every bit pattern is a valid quant) and a small finite f16 scale, so no
// block decodes to NaN or Inf and products stay in a sane range.
func RandomWeight(tb testing.TB, rng *rand.Rand, dt dtype.Type, rows, cols int) []byte {
	tb.Helper()
	size, err := dt.Bytes(rows, cols)
	if err != nil {
		tb.Fatalf("backendtest: RandomWeight: %v", err)
	}
	out := make([]byte, size)
	switch dt {
	case dtype.F32:
		for i := 0; i < size; i += 4 {
			binary.LittleEndian.PutUint32(out[i:], math.Float32bits(2*rng.Float32()-1))
		}
		return out
	case dtype.F16:
		for i := 0; i < size; i += 2 {
			binary.LittleEndian.PutUint16(out[i:], dtype.F32ToF16(2*rng.Float32()-1))
		}
		return out
	case dtype.BF16:
		for i := 0; i < size; i += 2 {
			binary.LittleEndian.PutUint16(out[i:], dtype.F32ToBF16(2*rng.Float32()-1))
		}
		return out
	}
	i := 0
	for ; i+8 <= size; i += 8 {
		binary.LittleEndian.PutUint64(out[i:], rng.Uint64())
	}
	for ; i < size; i++ {
		out[i] = byte(rng.Uint32())
	}
	// Scales (and mins) are normal (not subnormal) f16 values chosen so that
	// a dequantised element is O(0.1)–O(1): a block's largest level times
	// its largest sub-scale is about 1/smax (Q8_0 quants reach ±128, Q4_0
	// ±8, Q6_K ±32 times an int8 sub-scale, Q4_K 15 times a 6-bit one, …).
	f, ok := scaleFields[dt]
	if !ok {
		tb.Fatalf("backendtest: RandomWeight: unsupported type %v", dt)
	}
	for b := 0; b < size; b += dt.BlockBytes() {
		for _, at := range f.at {
			s := f.min + (f.max-f.min)*rng.Float32()
			if rng.IntN(2) == 0 {
				s = -s
			}
			binary.LittleEndian.PutUint16(out[b+at:], dtype.F32ToF16(s))
		}
	}
	return out
}

// scaleFields are the byte offsets of each block type's f16 scale and min
// fields, and the range of their magnitudes.
var scaleFields = map[dtype.Type]struct {
	at       []int
	min, max float32
}{
	dtype.Q8_0:   {[]int{0}, 1e-4, 1e-3},
	dtype.Q4_0:   {[]int{0}, 2e-3, 2e-2},
	dtype.Q4_1:   {[]int{0, 2}, 2e-3, 2e-2},
	dtype.Q5_0:   {[]int{0}, 1e-3, 1e-2},
	dtype.Q5_1:   {[]int{0, 2}, 1e-3, 1e-2},
	dtype.IQ4_NL: {[]int{0}, 1e-4, 1e-3},
	dtype.Q2_K:   {[]int{80, 82}, 5e-3, 2e-2},
	dtype.Q3_K:   {[]int{108}, 1e-3, 5e-3},
	dtype.Q4_K:   {[]int{0, 2}, 1e-4, 1e-3},
	dtype.Q5_K:   {[]int{0, 2}, 5e-5, 5e-4},
	dtype.Q6_K:   {[]int{208}, 7e-5, 3e-4},
	dtype.IQ4_XS: {[]int{0}, 2e-5, 2e-4},
}

// dequantize expands a [rows, cols] tensor stored as dt with the dtype
// reference conversion.
func dequantize(tb testing.TB, dt dtype.Type, data []byte, rows, cols int) []float32 {
	tb.Helper()
	rb, err := dt.RowBytes(cols)
	if err != nil {
		tb.Fatalf("backendtest: dequantize: %v", err)
	}
	out := make([]float32, rows*cols)
	for r := range rows {
		dtype.DequantizeRow(dt, out[r*cols:(r+1)*cols], data[r*rb:(r+1)*rb])
	}
	return out
}

// randF32 returns n values uniform in [lo, hi).
func randF32(rng *rand.Rand, n int, lo, hi float32) []float32 {
	out := make([]float32, n)
	for i := range out {
		out[i] = lo + (hi-lo)*rng.Float32()
	}
	return out
}

// refMatMul returns x·wᵀ for the first n rows and, per output, Σ|x·w|: the
// magnitude that bounds the rounding of any summation order.
func refMatMul(x, w []float32, n, k, m int) (want, mag []float64) {
	want, mag = make([]float64, n*m), make([]float64, n*m)
	for i := range n {
		for o := range m {
			var s, a float64
			for j := range k {
				p := float64(x[i*k+j]) * float64(w[o*k+j])
				s += p
				a += math.Abs(p)
			}
			want[i*m+o], mag[i*m+o] = s, a
		}
	}
	return want, mag
}

func refRMSNorm(x, w []float32, n, cols int, eps float32) []float64 {
	out := make([]float64, n*cols)
	for i := range n {
		var ss float64
		for j := range cols {
			ss += float64(x[i*cols+j]) * float64(x[i*cols+j])
		}
		r := 1 / math.Sqrt(ss/float64(cols)+float64(eps))
		for j := range cols {
			out[i*cols+j] = float64(x[i*cols+j]) * r * float64(w[j])
		}
	}
	return out
}

// refRoPE rotates a copy of x as llama.cpp defines it: row t turns pair i
// by fs·pos[t]·theta^(-2i/dims)/freqs[i], scaled by ms; NeoX pairs (i,
// i+dims/2), otherwise (2i, 2i+1).
func refRoPE(x []float32, n, heads, headDim int, pos []int32, dims int, theta float64, freqs []float32, neox bool, fs, ms float64) []float64 {
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = float64(v)
	}
	for t := range n {
		p := float64(pos[t])
		for h := range heads {
			base := t*heads*headDim + h*headDim
			for i := range dims / 2 {
				f := math.Pow(theta, -2*float64(i)/float64(dims))
				if freqs != nil {
					f /= float64(freqs[i])
				}
				a, b := base+2*i, base+2*i+1
				if neox {
					a, b = base+i, base+i+dims/2
				}
				s, c := math.Sincos(fs * p * f)
				s, c = s*ms, c*ms
				x0, x1 := out[a], out[b]
				out[a], out[b] = x0*c-x1*s, x0*s+x1*c
			}
		}
	}
	return out
}

func refSiLUMul(g, u []float32) []float64 {
	out := make([]float64, len(g))
	for i := range g {
		x := float64(g[i])
		out[i] = x / (1 + math.Exp(-x)) * float64(u[i])
	}
	return out
}

// refAttention computes rows of attention where row i (query q[i]) sees
// the cache cells visible(i) lists; caches are [cells, kvHeads, headDim],
// and softCap > 0 caps each score s = q·k to softCap·tanh(s/softCap) before
// scale. With halfK or halfV, a K or V cache is F16 with llama.cpp's
// rounding points: the query rounded to f16 before its dot products with an
// F16 K, each probability rounded to f16 before it weights an F16 V (k and v
// hold the f16 values already). mag is Σ_j p_j·|v_j,d|, the scale of the
// weighted sum's rounding, and big max_j p_j·|v_j,d|, the size of one
// probability rounding. A row that sees no cell gets zeros.
func refAttention(q, k, v []float32, n, heads, kvHeads, headDim int, scale, softCap float32, visible func(i int) []int, halfK, halfV bool) (want, mag, big []float64) {
	cols, kvCols := heads*headDim, kvHeads*headDim
	want, mag, big = make([]float64, n*cols), make([]float64, n*cols), make([]float64, n*cols)
	qr := q
	if halfK {
		qr = make([]float32, len(q))
		dtype.RoundActivations(dtype.F16, qr, q)
	}
	for i := range n {
		cells := visible(i)
		for h := range heads {
			kh := h / (heads / kvHeads)
			s := make([]float64, len(cells))
			mx := math.Inf(-1)
			for jj, j := range cells {
				var d float64
				for c := range headDim {
					d += float64(qr[i*cols+h*headDim+c]) * float64(k[j*kvCols+kh*headDim+c])
				}
				if softCap > 0 {
					d = float64(softCap) * math.Tanh(d/float64(softCap))
				}
				s[jj] = d * float64(scale)
				mx = math.Max(mx, s[jj])
			}
			var sum float64
			for jj := range s {
				s[jj] = math.Exp(s[jj] - mx)
				sum += s[jj]
			}
			for jj, j := range cells {
				p := s[jj] / sum
				if halfV {
					p = float64(dtype.F16ToF32(dtype.F32ToF16(float32(p))))
				}
				for c := range headDim {
					vv := float64(v[j*kvCols+kh*headDim+c])
					o := i*cols + h*headDim + c
					want[o] += p * vv
					mag[o] += p * math.Abs(vv)
					big[o] = math.Max(big[o], p*math.Abs(vv))
				}
			}
		}
	}
	return want, mag, big
}

// roundActivations applies dtype.RoundActivations for weights of type dt to
// n rows of length k, and returns per row the largest quantisation step
// (0 for F16 and BF16, whose per-element rounding leaves no choice).
func roundActivations(dt dtype.Type, x []float32, k int) (xr []float32, step []float64) {
	n := len(x) / k
	xr, step = make([]float32, len(x)), make([]float64, n)
	at := dt.ActivationType()
	for i := range n {
		row := x[i*k : (i+1)*k]
		dtype.RoundActivations(at, xr[i*k:(i+1)*k], row)
		bs := at.BlockSize()
		for b := 0; b+bs <= k && (at == dtype.Q8_0 || at == dtype.Q8_1 || at == dtype.Q8_K); b += bs {
			var d float32
			if at != dtype.Q8_K {

				d, _ = dtype.Q8_0Scale(row[b : b+bs])
			} else {
				d, _ = dtype.Q8_KScale(row[b : b+bs])
			}
			step[i] = math.Max(step[i], math.Abs(float64(d)))
		}
	}
	return xr, step
}

// rowMaxAbs is max_k |w[o, k]| for each output row o.
func rowMaxAbs(w []float32, m, k int) []float64 {
	out := make([]float64, m)
	for o := range m {
		for _, v := range w[o*k : (o+1)*k] {
			out[o] = math.Max(out[o], math.Abs(float64(v)))
		}
	}
	return out
}

// q8_1SumTol is, per output, the error llama.cpp's arithmetic allows in the
// min term of Q4_1 and Q5_1 weights (zero for other types): a block adds
// m·s, where s is Σq times the activation scale before its f16 rounding,
// itself rounded to f16, while the reference adds m·Σ f16(d)·q; the two
// differ by at most two f16 roundings, 2⁻¹⁰ of |m·Σ xr| over the block.
func q8_1SumTol(dt dtype.Type, raw []byte, xr []float32, n, k, m int) []float64 {
	tol := make([]float64, n*m)
	if dt.ActivationType() != dtype.Q8_1 {
		return tol
	}
	bs, bb := dt.BlockSize(), dt.BlockBytes()
	var l dtype.Levels
	for o := range m {
		for b := range k / bs {
			l.Unpack(dt, raw[(o*k/bs+b)*bb:])
			for i := range n {
				var s float64
				for _, v := range xr[i*k+b*bs : i*k+(b+1)*bs] {
					s += float64(v)
				}
				tol[i*m+o] += 0x1p-10 * math.Abs(float64(l.M)*s)
			}
		}
	}
	return tol
}
