package cpu

import "math"

// expf is e^x in float32, computed as ggml's AVX2 and NEON ggml_v_expf does
// (ARM's optimized-routines algorithm: 2^n by exponent arithmetic, a degree-5
// polynomial on the remainder, and every a·b+c a fused multiply-add). SiLU
// and the attention softmax call it, in Go and in the C kernels (ops.c), with
// identical operations, so every SIMD level gives the same bits as this
// function and as llama.cpp's vectorised exp.
func expf(x float32) float32 {
	z, n, b, u, p := expfReduce(x)
	e := math.Float32bits(z) << 23
	k := math.Float32frombits(e + math.Float32bits(1))
	j := fmaf(p, u, float32(expC4)*b)
	an := float32(math.Abs(float64(n)))
	if !(an > 126) {
		return fmaf(j, k, k)
	}
	var g uint32
	if n <= 0 {
		g = 0x82000000
	}
	s1 := math.Float32frombits(g + 0x7f000000)
	s2 := math.Float32frombits(e - g)
	if an > 192 {
		return s1 * s1
	}
	return fmaf(s2, j, s2) * s1
}

// expC4 is the polynomial's linear coefficient, which ggml's AVX2 and
// AVX-512 exps apply differently (expf, expf512).
const expC4 = 0x1.ffffecp-1

// expfReduce is the part ggml's exps share: z = x·log2(e) + 1.5·2²³ (its
// low bits are n), n = round(x·log2 e), b = x − n·ln 2 in two steps, u = b²,
// and p the polynomial's terms above the linear one, p·u + c4·b ≈ e^b − 1.
func expfReduce(x float32) (z, n, b, u, p float32) {
	const (
		r   = 0x1.8p23
		l2e = 0x1.715476p+0
		ln1 = 0x1.62e4p-1
		ln2 = 0x1.7f7d1cp-20
		c0  = 0x1.0e4020p-7
		c1  = 0x1.573e2ep-5
		c2  = 0x1.555e66p-3
		c3  = 0x1.fffdb6p-2
	)
	z = fmaf(x, l2e, r)
	n = z - r
	b = fmaf(-n, ln2, fmaf(-n, ln1, x))
	u = b * b
	p = fmaf(fmaf(c0, b, c1), u, fmaf(c2, b, c3))
	return z, n, b, u, p
}

// fmaf is a·b+c rounded once to float32, as the FMA instruction computes it.

// a·b is exact in float64; the float64 sum then rounds, and rounding that
// again to float32 is wrong only when the float64 sum sits exactly halfway
// between two float32 values (normal or subnormal), which the sum's exact
// error (TwoSum) resolves.
func fmaf(a, b, c float32) float32 {
	p := float64(a) * float64(b)
	s := p + float64(c)
	r := float32(s)
	if float64(r) == s || math.IsInf(s, 0) || math.IsNaN(s) {
		return r
	}
	// The float32 neighbour of r on s's side; s is a tie only at their
	// midpoint, which float64 holds exactly.
	nb := math.Nextafter32(r, float32(math.Copysign(math.Inf(1), s-float64(r))))
	if s != (float64(r)+float64(nb))/2 {
		return r
	}
	bb := s - p
	err := (p - (s - bb)) + (float64(c) - bb)
	switch {
	case err == 0:
		return r
	case (err > 0) == (float64(nb) > float64(r)):
		return nb
	}
	return r
}
