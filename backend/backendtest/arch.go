package backendtest

import (
	"fmt"
	"math"

	"github.com/glint-llm/glint/dtype"
	"github.com/glint-llm/glint/internal/ggmlmath"
)

// The conformance tests of the ops that architectures beyond Llama add:
// per-head RMSNorm (Qwen 3, Gemma 3), LayerNorm and GELU (GPT-2), GeGLU
// (Gemma), biases (Qwen 2, GPT-2), scales and soft-capping (Gemma 2).

func testRMSNormPerHead(h *harness) {
	for _, c := range []struct{ heads, headDim int }{{4, 16}, {3, 37}, {2, 256}} {
		cols := c.heads * c.headDim
		w := h.rand(c.headDim)
		wt := h.weight("q_norm", dtype.F32, f32Bytes(w), c.headDim)
		for _, n := range []int{1, 5} {
			x := make([]float32, (n+1)*cols)
			for i := range x {
				// Heads of different magnitudes: each must be scaled on its own.
				s := float32(math.Pow(10, float64((i/c.headDim)%5-2)))
				x[i] = s * (2*h.rng.Float32() - 1)
			}
			xt := h.f32(x, n+1, cols)
			dst := h.f32(sentinel((n+1)*cols), n+1, cols)
			const eps = 1e-6
			h.be.RMSNorm(dst, xt, wt, n, eps)
			got := h.read(dst)
			want := refRMSNorm(x, w, n*c.heads, c.headDim, eps)
			// As for RMSNorm: a few float32 roundings per element.
			name := fmt.Sprintf("%d heads of %d n=%d", c.heads, c.headDim, n)
			near(h.t, name, got[:n*cols], want, func(i int) float64 { return 1e-5 * math.Abs(want[i]) })
			exact(h.t, name+" row past n", got[n*cols:], sentinel(cols))
		}
	}
}

func refLayerNorm(x, w, b []float32, n, cols int, eps float32) (want, mag []float64) {
	want, mag = make([]float64, n*cols), make([]float64, n*cols)
	for i := range n {
		row := x[i*cols : (i+1)*cols]
		var mean, v float64
		for _, e := range row {
			mean += float64(e)
		}
		mean /= float64(cols)
		for _, e := range row {
			v += (float64(e) - mean) * (float64(e) - mean)
		}
		r := 1 / math.Sqrt(v/float64(cols)+float64(eps))
		for j, e := range row {
			y := (float64(e) - mean) * r * float64(w[j])
			mag[i*cols+j] = math.Abs(y) + math.Abs(float64(e))*r*math.Abs(float64(w[j]))
			if b != nil {
				y += float64(b[j])
				mag[i*cols+j] += math.Abs(float64(b[j]))
			}
			want[i*cols+j] = y
		}
	}
	return want, mag
}

func testLayerNorm(h *harness) {
	for _, cols := range []int{1, 37, 100, 768} {
		w, bias := h.rand(cols), h.rand(cols)
		wt := h.weight("norm", dtype.F32, f32Bytes(w), cols)
		bt := h.weight("norm_b", dtype.F32, f32Bytes(bias), cols)
		for _, n := range []int{1, 3, 17} {
			// Rows of different magnitudes and offsets: the norm removes both.
			x := make([]float32, (n+1)*cols)
			for i := range n + 1 {
				s := float32(math.Pow(10, float64(i%5-2)))
				off := float32(i%3) * s
				for j := range cols {
					x[i*cols+j] = off + s*(2*h.rng.Float32()-1)
				}
			}
			xt := h.f32(x, n+1, cols)
			for _, withBias := range []bool{true, false} {
				dst := h.f32(sentinel((n+1)*cols), n+1, cols)
				var bv []float32
				if withBias {
					bv = bias
					h.be.LayerNorm(dst, xt, wt, bt, n, 1e-5)
				} else {
					h.be.LayerNorm(dst, xt, wt, nil, n, 1e-5)
				}
				got := h.read(dst)
				want, mag := refLayerNorm(x, w, bv, n, cols, 1e-5)
				// The float32 deviations x − mean carry the mean's rounding
				// (2⁻²⁴·|x|, relative to the normalised |x|·scale), plus a
				// few roundings of the result and of the bias add.
				name := fmt.Sprintf("cols %d n=%d bias %v", cols, n, withBias)
				near(h.t, name, got[:n*cols], want, func(i int) float64 { return 4e-6 * mag[i] })
				exact(h.t, name+" row past n", got[n*cols:], sentinel(cols))
			}
		}
	}
}

// refGELU is GELU's tanh approximation in float64.
func refGELU(x float64) float64 {
	return 0.5 * x * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(x+0.044715*x*x*x)))
}

func testGELU(h *harness) {
	for _, gated := range []bool{false, true} {
		for _, cols := range []int{1, 37, 3072 + 5} {
			for _, n := range []int{1, 3, 17} {
				g := randF32(h.rng, (n+1)*cols, -12, 12)
				u := h.rand((n + 1) * cols)
				gt, ut := h.f32(g, n+1, cols), h.f32(u, n+1, cols)
				dst := h.f32(sentinel((n+1)*cols), n+1, cols)
				if gated {
					h.be.GELUMul(dst, gt, ut, n)
				} else {
					h.be.GELU(dst, gt, n)
				}
				got := h.read(dst)
				want, ggml := make([]float64, n*cols), make([]float32, n*cols)
				for i := range want {
					want[i], ggml[i] = refGELU(float64(g[i])), ggmlmath.GELU(g[i])
					if gated {
						want[i] *= float64(u[i])
						ggml[i] *= u[i]
					}
				}
				// llama.cpp's CPU build rounds x to f16 and looks the f16
				// result up in a table: two relative errors of 2⁻¹¹ (gelu′ ≤
				// 1.13), times |up| when gated, and one product rounding.
				name := fmt.Sprintf("gated %v cols %d n=%d", gated, cols, n)
				near(h.t, name, got[:n*cols], want, func(i int) float64 {
					a := 0x1p-11*(1.13*math.Abs(float64(g[i]))+math.Abs(refGELU(float64(g[i])))) + 0x1p-24
					if gated {
						a *= math.Abs(float64(u[i]))
					}
					return a + 0x1p-24*math.Abs(want[i])
				})
				// And the bits are that table's (ggmlmath, built as ggml
				// builds it), as in llama.cpp.
				exact(h.t, name+" ggml's table", got[:n*cols], ggml)
				exact(h.t, name+" row past n", got[n*cols:], sentinel(cols))
			}
		}
	}
}

func testAddBias(h *harness) {
	const cols = 37
	bias := h.rand(cols)
	bt := h.weight("bias", dtype.F32, f32Bytes(bias), cols)
	for _, n := range []int{1, 3, 17} {
		x := h.rand((n + 1) * cols)
		want := make([]float32, n*cols)
		for i := range want {
			want[i] = x[i] + bias[i%cols] // one float32 rounding: exact
		}
		xt := h.f32(x, n+1, cols)
		dst := h.f32(sentinel((n+1)*cols), n+1, cols)
		h.be.AddBias(dst, xt, bt, n)
		exact(h.t, fmt.Sprintf("n=%d", n), h.read(dst)[:n*cols], want)
		exact(h.t, fmt.Sprintf("n=%d row past n", n), h.read(dst)[n*cols:], sentinel(cols))
		h.be.AddBias(xt, xt, bt, n)
		exact(h.t, fmt.Sprintf("n=%d in place", n), h.read(xt)[:n*cols], want)
	}
}

func testScale(h *harness) {
	const cols = 37
	for _, n := range []int{1, 3, 17} {
		x := h.rand((n + 1) * cols)
		const s = float32(45.254833) // √2048, Gemma's embedding scale
		want := make([]float32, n*cols)
		for i := range want {
			want[i] = x[i] * s // one float32 rounding: exact
		}
		xt := h.f32(x, n+1, cols)
		dst := h.f32(sentinel((n+1)*cols), n+1, cols)
		h.be.Scale(dst, xt, n, s)
		exact(h.t, fmt.Sprintf("n=%d", n), h.read(dst)[:n*cols], want)
		exact(h.t, fmt.Sprintf("n=%d row past n", n), h.read(dst)[n*cols:], sentinel(cols))
		h.be.Scale(xt, xt, n, s)
		exact(h.t, fmt.Sprintf("n=%d in place", n), h.read(xt)[:n*cols], want)
	}
}

func testSoftCap(h *harness) {
	const cols = 1000
	for _, c := range []float32{30, 50} {
		for _, n := range []int{1, 3} {
			x := randF32(h.rng, (n+1)*cols, -200, 200)
			xt := h.f32(x, n+1, cols)
			h.be.SoftCap(xt, n, c)
			got := h.read(xt)
			want := make([]float64, n*cols)
			for i := range want {
				want[i] = float64(c) * math.Tanh(float64(x[i])/float64(c))
			}
			// x·(1/c) in float32, tanhf within 2 ulp, and the product:
			// a few 2⁻²⁴ relative, plus tanh′ ≤ 1 times the scaled input's
			// rounding.
			name := fmt.Sprintf("cap %g n=%d", c, n)
			near(h.t, name, got[:n*cols], want, func(i int) float64 {
				return 0x1p-21*math.Abs(want[i]) + 0x1p-22*math.Abs(float64(x[i]))
			})
			exact(h.t, name+" row past n", got[n*cols:], x[n*cols:])
		}
	}
}
