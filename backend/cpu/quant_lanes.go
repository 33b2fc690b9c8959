package cpu

import (
	"github.com/glint-llm/glint/dtype"
)

// dotKLanes is the K-quant dot in ggml's x86 order (its only x86 kernels are
// AVX2, which AVX-512 builds run too): eight float lanes; lane l of a
// super-block is the exact integer Σ over its eight 32-element chunks of
// scale·v·q for chunk elements 4l…4l+3, added with one fused multiply-add
// by d = dx·f16(d); the lanes are reduced as hsum_float_8 does. The mins
// follow each type's own kernel (see the switch).
func dotKLanes(dt dtype.Type, a *acts, i, k int, w []byte) float32 {
	bb := dt.BlockBytes()
	nb := k / dtype.QK_K
	q := a.q[i*k : (i+1)*k]
	xd := a.d[i*nb : (i+1)*nb]
	var l dtype.Levels
	var acc [8]float32
	var accm [4]float32
	var summs float32
	for b := range nb {
		l.Unpack(dt, w[b*bb:(b+1)*bb])
		qb := q[b*dtype.QK_K : (b+1)*dtype.QK_K]
		bs := a.bs[i*k/16+16*b : i*k/16+16*b+16]
		// The conversions keep the compiler from fusing these products
		// into a later addition (Go may, across statements).
		d := float32(xd[b] * l.D)
		dmin := float32(-xd[b] * l.M)
		var lane [8]int32
		for e := range dtype.QK_K {
			lane[e%32/4] += l.Scale[e/l.Group] * l.V[e] * int32(qb[e])
		}
		switch dt {
		case dtype.Q2_K:
			for j := range 8 {
				p := l.Min[2*j]*int32(bs[2*j]) + l.Min[2*j+1]*int32(bs[2*j+1])
				acc[j] = fmaf(dmin, float32(p), acc[j])
			}
		case dtype.Q4_K, dtype.Q5_K:
			var p [4]int32
			for j := range 4 {
				p[j] = l.Min[2*j]*(int32(bs[4*j])+int32(bs[4*j+1])) + l.Min[2*j+1]*(int32(bs[4*j+2])+int32(bs[4*j+3]))
			}
			if dt == dtype.Q4_K {
				for j := range 4 {
					accm[j] = fmaf(dmin, float32(p[j]), accm[j])
				}
			} else {
				summs = fmaf(dmin, float32(p[0]+p[1]+p[2]+p[3]), summs)
			}
		}
		for j := range 8 {
			acc[j] = fmaf(d, float32(lane[j]), acc[j])
		}
	}
	r := hsum8(acc)
	switch dt {
	case dtype.Q4_K:
		r += (accm[0] + accm[2]) + (accm[1] + accm[3]) // _mm_add_ps(acc_m, movehl), then add_ss(movehdup)

	case dtype.Q5_K:
		r += summs
	}
	return r
}

// hsum8 is ggml's hsum_float_8 (and, the same operations, tinyBLAS's hsum
// of an __m256 and ggml_vec_soft_max_f32's block sum on AVX2): the upper
// four lanes onto the lower, then lanes 2 and 3 onto 0 and 1, then 1 onto 0.
func hsum8(v [8]float32) float32 {
	r0, r1, r2, r3 := v[0]+v[4], v[1]+v[5], v[2]+v[6], v[3]+v[7]
	return (r0 + r2) + (r1 + r3)
}

// dot32Lanes is the dot of the 32-element block types in ggml's x86 order:
// eight float lanes, lane l of a block the exact integer Σ v·q over its
// elements 4l…4l+3, added by one fused multiply-add with f16(d)·dx. Decode
// runs ggml_vec_dot_*: IQ4_NL alternates two accumulators between even and
// odd blocks; Q4_1 and Q5_1 also sum m·s in one scalar, added after the
// reduction. Prefill of Q5_0, Q8_0 and IQ4_NL runs llamafile's tinyBLAS,
// whose one accumulator takes every block in order (as ggml_vec_dot_q8_0_q8_0
// does in decode).
func dot32Lanes(dt dtype.Type, a *acts, i, k int, w []byte, prefill bool) float32 {
	bb := dt.BlockBytes()
	nb := k / 32
	q := a.q[i*k : (i+1)*k]
	xd := a.d[i*nb : (i+1)*nb]
	var l dtype.Levels
	var acc [2][8]float32
	var summs float32
	var tailD float32 // an odd last block's scale and sum (pairs)
	var tailS int32
	hasTail := false
	pairs := dt == dtype.IQ4_NL && !prefill
	for b := range nb {
		l.Unpack(dt, w[b*bb:(b+1)*bb])
		qb := q[b*32 : (b+1)*32]
		var lane [8]int32
		for e := range 32 {
			lane[e/4] += l.V[e] * int32(qb[e])
		}
		d := float32(l.D * xd[b])
		if pairs && b == nb-1 && nb%2 == 1 {
			// ggml's scalar tail for an odd last block, sumf += d·s after
			// the reduction, which gcc fuses (checked bit for bit against
			// ggml_flash_attn_ext over IQ4_NL keys of 96).
			tailD, tailS, hasTail = d, lane[0]+lane[1]+lane[2]+lane[3]+lane[4]+lane[5]+lane[6]+lane[7], true
			continue
		}
		if dt.ActivationType() == dtype.Q8_1 {
			summs = fmaf(l.M, a.s[i*nb+b], summs)
		}
		ai := 0
		if pairs {
			ai = b % 2
		}
		for j := range 8 {
			acc[ai][j] = fmaf(d, float32(lane[j]), acc[ai][j])
		}
	}
	for j := range 8 {
		acc[0][j] += acc[1][j]
	}
	if hasTail {
		return fmaf(tailD, float32(tailS), hsum8(acc[0]))
	}
	return hsum8(acc[0]) + summs
}

// dotQ4_0Repacked is ggml's Q4_0 dot for matrices whose rows are a multiple
// of 8: ggml repacks those 8×8 (ggml-cpu-aarch64.cpp, on x86 too) and its
// gemv and gemm keep one float accumulator per output, fed block after
// block the exact integer sum times f16(d)·dx by one fused multiply-add.
// Other Q4_0 matrices take dot32Lanes.
func dotQ4_0Repacked(q []int8, xd []float32, w []byte) float32 {
	nb := len(q) / dtype.QK4_0
	w = w[:nb*dtype.BlockBytesQ4_0]
	var acc float32
	for b := range nb {
		blk := (*[dtype.BlockBytesQ4_0]byte)(w[b*dtype.BlockBytesQ4_0:])
		qb := (*[dtype.QK4_0]int8)(q[b*dtype.QK4_0:])
		var s int32
		for j := range dtype.QK4_0 / 2 {
			v := blk[2+j]
			s += (int32(v&0xF)-8)*int32(qb[j]) + (int32(v>>4)-8)*int32(qb[j+16])
		}
		d := float32(f16Table[uint16(blk[0])|uint16(blk[1])<<8] * xd[b])
		acc = fmaf(float32(s), d, acc)
	}
	return acc
}
