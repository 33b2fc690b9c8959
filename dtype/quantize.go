package dtype

import (
	"encoding/binary"
	"fmt"
	"math"
)

// QuantizeRow stores the row src as t in dst, which must hold exactly
// t.RowBytes(len(src)) bytes. The block formats follow ggml's reference
// quantizers (quantize_row_{q8_0,q4_0,q6_K}_ref in ggml-quants.c, and the
// others in quantize_more.go), which are what llama-quantize runs when no
// importance matrix is given, so a file
// written here has the bytes llama.cpp would have written. Every float32
// operation is rounded to float32 explicitly, as the C code does, so that the
// compiler cannot fuse multiply-adds and change a rounding.
//
// Like DequantizeRow it is a reference function for callers that have
// already validated shapes: an unsupported type or a dst of the wrong size
// is a programming error and panics.
func QuantizeRow(t Type, dst []byte, src []float32) {
	want, err := t.RowBytes(len(src))
	if err != nil {
		panic(fmt.Sprintf("dtype: QuantizeRow: %v", err))
	}
	if len(dst) != want {
		panic(fmt.Sprintf("dtype: QuantizeRow: %v row of %d elements needs %d bytes, dst has %d", t, len(src), want, len(dst)))
	}
	switch t {
	case F32:
		for i, v := range src {
			binary.LittleEndian.PutUint32(dst[4*i:], math.Float32bits(v))
		}
	case F16:
		for i, v := range src {
			binary.LittleEndian.PutUint16(dst[2*i:], F32ToF16(v))
		}
	case BF16:
		for i, v := range src {
			binary.LittleEndian.PutUint16(dst[2*i:], F32ToBF16(v))
		}
	case Q8_0:
		for b := 0; b < len(src)/QK8_0; b++ {
			quantizeQ8_0(dst[b*BlockBytesQ8_0:(b+1)*BlockBytesQ8_0], src[b*QK8_0:(b+1)*QK8_0])
		}
	case Q4_0:
		for b := 0; b < len(src)/QK4_0; b++ {
			quantizeQ4_0(dst[b*BlockBytesQ4_0:(b+1)*BlockBytesQ4_0], src[b*QK4_0:(b+1)*QK4_0])
		}
	case Q6_K:
		for b := 0; b < len(src)/QK_K; b++ {
			quantizeQ6K(dst[b*BlockBytesQ6_K:(b+1)*BlockBytesQ6_K], src[b*QK_K:(b+1)*QK_K])
		}
	case Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, IQ4_NL, IQ4_XS:
		bs, bb := t.BlockSize(), t.BlockBytes()
		q := blockQuantizers[t]
		for b := 0; b < len(src)/bs; b++ {
			q(dst[b*bb:(b+1)*bb], src[b*bs:(b+1)*bs])
		}
	default:
		panic(fmt.Sprintf("dtype: QuantizeRow: unsupported type %v", t))
	}
}

// quantizeQ8_0 is quantize_row_q8_0_ref: d = max|x|/127, q = roundf(x/d)
// (half away from zero, which math.Round also does).
func quantizeQ8_0(blk []byte, x []float32) {
	var amax float32
	for _, v := range x {
		amax = max(amax, abs32(v))
	}
	d := float32(amax / 127)
	var id float32
	if d != 0 {
		id = float32(1 / d)
	}
	binary.LittleEndian.PutUint16(blk, F32ToF16(d))
	for j, v := range x {
		blk[2+j] = byte(int8(math.Round(float64(float32(v * id)))))
	}
}

// quantizeQ4_0 is quantize_row_q4_0_ref. The scale comes from the element of
// largest magnitude with its sign (the first one on ties), d = max/-8, so that
// element maps exactly to the nibble 0 (-8) and the other side gets up to +7;
// the nibble is (int8)(x/d + 8.5), truncated toward zero, capped at 15.
func quantizeQ4_0(blk []byte, x []float32) {
	mx, _ := signedMax(x)
	d := float32(mx / -8)
	var id float32
	if d != 0 {
		id = float32(1 / d)
	}
	binary.LittleEndian.PutUint16(blk, F32ToF16(d))
	for j := 0; j < QK4_0/2; j++ {
		x0 := float32(x[j] * id)
		x1 := float32(x[j+QK4_0/2] * id)
		q0 := min(15, int8(float32(x0+8.5)))
		q1 := min(15, int8(float32(x1+8.5)))
		blk[2+j] = byte(q0) | byte(q1)<<4
	}
}

// groupMaxEps is ggml's GROUP_MAX_EPS: a group whose largest magnitude is
// below it is stored as all zeros.
const groupMaxEps = 1e-15

// quantizeQ6K is quantize_row_q6_K_ref for one 256-element super-block:
// 16 sub-blocks of 16 get their own scale from make_qx_quants, the scales
// are themselves quantised to int8 against a shared f16 d, and the values
// are re-quantised against the rounded scales.
func quantizeQ6K(blk []byte, x []float32) {
	var L [QK_K]int8
	var scales [QK_K / 16]float32
	var maxScale, maxAbsScale float32
	for ib := range scales {
		s := makeQxQuants(16, 32, x[16*ib:16*ib+16], L[16*ib:16*ib+16])
		scales[ib] = s
		if a := abs32(s); a > maxAbsScale {
			maxAbsScale, maxScale = a, s
		}
	}
	clear(blk)
	if maxAbsScale < groupMaxEps {
		return // ggml writes an all-zero block (d = +0)
	}
	ql := blk[0:128]
	qh := blk[128:192]
	sc := blk[192:208]
	iscale := float32(-128 / maxScale)
	d16 := F32ToF16(float32(1 / iscale))
	binary.LittleEndian.PutUint16(blk[208:], d16)
	for ib := range scales {
		sc[ib] = byte(int8(min(127, nearestInt(float32(iscale*scales[ib])))))
	}
	dd := F16ToF32(d16)
	for j := 0; j < QK_K/16; j++ {
		d := float32(dd * float32(int8(sc[j])))
		if d == 0 {
			// ggml keeps make_qx_quants' levels for this sub-block.
			continue
		}
		for ii := 0; ii < 16; ii++ {
			l := nearestInt(float32(x[16*j+ii] / d))
			l = max(-32, min(31, l))
			L[16*j+ii] = int8(l + 32)
		}
	}
	for j := 0; j < QK_K; j += 128 {
		for l := 0; l < 32; l++ {
			q1 := byte(L[j+l]) & 0xF
			q2 := byte(L[j+l+32]) & 0xF
			q3 := byte(L[j+l+64]) & 0xF
			q4 := byte(L[j+l+96]) & 0xF
			ql[l] = q1 | q3<<4
			ql[l+32] = q2 | q4<<4
			qh[l] = byte(L[j+l])>>4 | (byte(L[j+l+32])>>4)<<2 | (byte(L[j+l+64])>>4)<<4 | (byte(L[j+l+96])>>4)<<6
		}
		ql = ql[64:]
		qh = qh[32:]
	}
}

// makeQxQuants is ggml's make_qx_quants with rmse_type 1 and no importance
// weights: start from the scale that maps the largest-magnitude element to
// -nmax, then try 18 nearby scales and keep the one minimising the x²-weighted
// squared error. L receives levels offset by nmax (0 … 2·nmax-1).
func makeQxQuants(n, nmax int, x []float32, L []int8) float32 {
	var mx, amax float32
	for i := 0; i < n; i++ {
		if ax := abs32(x[i]); ax > amax {
			amax, mx = ax, x[i]
		}
	}
	if amax < groupMaxEps {
		for i := 0; i < n; i++ {
			L[i] = 0
		}
		return 0
	}
	fnmax := float32(nmax)
	iscale := float32(-fnmax / mx)
	var sumlx, suml2 float32
	for i := 0; i < n; i++ {
		l := nearestInt(float32(iscale * x[i]))
		l = max(-nmax, min(nmax-1, l))
		L[i] = int8(l + nmax)
		w := float32(x[i] * x[i])
		fl := float32(l)
		sumlx = float32(sumlx + float32(float32(w*x[i])*fl))
		suml2 = float32(suml2 + float32(float32(w*fl)*fl))
	}
	var scale float32
	if suml2 != 0 {
		scale = float32(sumlx / suml2)
	}
	best := float32(scale * sumlx)
	for is := -9; is <= 9; is++ {
		if is == 0 {
			continue
		}
		iscale = float32(-float32(fnmax+float32(0.1*float32(is))) / mx)
		sumlx, suml2 = 0, 0
		for i := 0; i < n; i++ {
			l := nearestInt(float32(iscale * x[i]))
			l = max(-nmax, min(nmax-1, l))
			w := float32(x[i] * x[i])
			fl := float32(l)
			sumlx = float32(sumlx + float32(float32(w*x[i])*fl))
			suml2 = float32(suml2 + float32(float32(w*fl)*fl))
		}
		if suml2 > 0 && float32(sumlx*sumlx) > float32(best*suml2) {
			for i := 0; i < n; i++ {
				l := nearestInt(float32(iscale * x[i]))
				L[i] = int8(nmax + max(-nmax, min(nmax-1, l)))
			}
			scale = float32(sumlx / suml2)
			best = float32(scale * sumlx)
		}
	}
	return scale
}

// nearestInt is ggml's nearest_int: adding 1.5·2²³ leaves the rounded
// integer (ties to even) in the low mantissa bits. Valid for |f| ≤ 2²²-1,
// which every caller guarantees by construction.
func nearestInt(f float32) int {
	v := float32(f + 12582912)
	return int(math.Float32bits(v)&0x007fffff) - 0x00400000
}

func abs32(f float32) float32 { return math.Float32frombits(math.Float32bits(f) &^ (1 << 31)) }
