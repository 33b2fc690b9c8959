package dtype

import "encoding/binary"

// The block decoders below follow ggml's dequantize_row_* (ggml-quants.c)
// operation for operation: each float32 product or sum is rounded on its
// own (explicit float32 conversions keep Go from fusing a multiply-add,
// which ggml's portable build does not do either), so the values are ggml's
// to the bit. Each takes exactly one block.

var dequantizers = map[Type]func(y []float32, blk []byte){
	Q4_1:   dequantizeQ4_1,
	Q5_0:   dequantizeQ5_0,
	Q5_1:   dequantizeQ5_1,
	Q2_K:   dequantizeQ2K,
	Q3_K:   dequantizeQ3K,
	Q4_K:   dequantizeQ4K,
	Q5_K:   dequantizeQ5K,
	IQ4_NL: dequantizeIQ4NL,
	IQ4_XS: dequantizeIQ4XS,
}

// kvaluesIQ4NL is ggml's kvalues_iq4nl: the 16 non-uniform levels of IQ4_NL
// and IQ4_XS, denser near zero where weights are.
var kvaluesIQ4NL = [16]int8{-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113}

func f16at(b []byte) float32 { return F16ToF32(binary.LittleEndian.Uint16(b)) }

func dequantizeQ4_1(y []float32, blk []byte) {
	d, m := f16at(blk), f16at(blk[2:])
	qs := blk[4:]
	for j := 0; j < QK4_1/2; j++ {
		y[j] = float32(float32(qs[j]&0xF)*d) + m
		y[j+QK4_1/2] = float32(float32(qs[j]>>4)*d) + m
	}
}

func dequantizeQ5_0(y []float32, blk []byte) {
	d := f16at(blk)
	qh := binary.LittleEndian.Uint32(blk[2:])
	qs := blk[6:]
	for j := 0; j < QK5_0/2; j++ {
		h0 := byte(qh>>j<<4) & 0x10
		h1 := byte(qh>>(j+12)) & 0x10
		y[j] = float32(int(qs[j]&0xF|h0)-16) * d
		y[j+QK5_0/2] = float32(int(qs[j]>>4|h1)-16) * d
	}
}

func dequantizeQ5_1(y []float32, blk []byte) {
	d, m := f16at(blk), f16at(blk[2:])
	qh := binary.LittleEndian.Uint32(blk[4:])
	qs := blk[8:]
	for j := 0; j < QK5_1/2; j++ {
		h0 := byte(qh>>j<<4) & 0x10
		h1 := byte(qh>>(j+12)) & 0x10
		y[j] = float32(float32(qs[j]&0xF|h0)*d) + m
		y[j+QK5_1/2] = float32(float32(qs[j]>>4|h1)*d) + m
	}
}

// dequantizeQ2K: 16 sub-blocks of 16, each with a 4-bit scale (low nibble)
// and 4-bit min (high nibble) against the f16 d and dmin; 2-bit levels.
func dequantizeQ2K(y []float32, blk []byte) {
	sc := blk[0:16]
	q := blk[16:80]
	d, dmin := f16at(blk[80:]), f16at(blk[82:])
	is := 0
	for n := 0; n < QK_K; n += 128 {
		shift := 0
		for j := 0; j < 4; j++ {
			for half := 0; half < 2; half++ {
				s := sc[is]
				is++
				dl := d * float32(s&0xF)
				ml := dmin * float32(s>>4)
				for l := 0; l < 16; l++ {
					v := (q[l+16*half] >> shift) & 3
					y[0] = float32(dl*float32(v)) - ml
					y = y[1:]
				}
			}
			shift += 2
		}
		q = q[32:]
	}
}

// q3KScales unpacks Q3_K's sixteen 6-bit scales (stored biased by 32).
func q3KScales(packed []byte) [16]int8 {
	var s [16]int8
	for j := 0; j < 16; j++ {
		var lo byte
		if j < 8 {
			lo = packed[j] & 0xF
		} else {
			lo = packed[j-8] >> 4
		}
		hi := (packed[8+j%4] >> (2 * (j / 4))) & 3
		s[j] = int8(lo|hi<<4) - 32
	}
	return s
}

// dequantizeQ3K: 16 sub-blocks of 16 with signed 6-bit scales; 3-bit
// levels whose high bit is in hmask (set means no -4 offset).
func dequantizeQ3K(y []float32, blk []byte) {
	hm := blk[0:32]
	q := blk[32:96]
	scales := q3KScales(blk[96:108])
	dAll := f16at(blk[108:])
	is := 0
	m := byte(1)
	for n := 0; n < QK_K; n += 128 {
		shift := 0
		for j := 0; j < 4; j++ {
			for half := 0; half < 2; half++ {
				dl := dAll * float32(scales[is])
				is++
				for l := 0; l < 16; l++ {
					v := int((q[l+16*half] >> shift) & 3)
					if hm[l+16*half]&m == 0 {
						v -= 4
					}
					y[0] = dl * float32(v)
					y = y[1:]
				}
			}
			shift += 2
			m <<= 1
		}
		q = q[32:]
	}
}

// scaleMinK4 is ggml's get_scale_min_k4: Q4_K and Q5_K pack eight 6-bit
// scales and eight 6-bit mins into 12 bytes.
func scaleMinK4(j int, q []byte) (d, m byte) {
	if j < 4 {
		return q[j] & 63, q[j+4] & 63
	}
	return q[j+4]&0xF | (q[j-4]>>6)<<4, q[j+4]>>4 | (q[j]>>6)<<4
}

func dequantizeQ4K(y []float32, blk []byte) {
	d, dmin := f16at(blk), f16at(blk[2:])
	scales := blk[4:16]
	q := blk[16:]
	is := 0
	for j := 0; j < QK_K; j += 64 {
		sc, m := scaleMinK4(is, scales)
		d1, m1 := d*float32(sc), dmin*float32(m)
		sc, m = scaleMinK4(is+1, scales)
		d2, m2 := d*float32(sc), dmin*float32(m)
		for l := 0; l < 32; l++ {
			y[j+l] = float32(d1*float32(q[l]&0xF)) - m1
			y[j+32+l] = float32(d2*float32(q[l]>>4)) - m2
		}
		q = q[32:]
		is += 2
	}
}

func dequantizeQ5K(y []float32, blk []byte) {
	d, dmin := f16at(blk), f16at(blk[2:])
	scales := blk[4:16]
	qh := blk[16:48]
	ql := blk[48:]
	is := 0
	u1, u2 := byte(1), byte(2)
	for j := 0; j < QK_K; j += 64 {
		sc, m := scaleMinK4(is, scales)
		d1, m1 := d*float32(sc), dmin*float32(m)
		sc, m = scaleMinK4(is+1, scales)
		d2, m2 := d*float32(sc), dmin*float32(m)
		for l := 0; l < 32; l++ {
			lo, hi := int(ql[l]&0xF), int(ql[l]>>4)
			if qh[l]&u1 != 0 {
				lo += 16
			}
			if qh[l]&u2 != 0 {
				hi += 16
			}
			y[j+l] = float32(d1*float32(lo)) - m1
			y[j+32+l] = float32(d2*float32(hi)) - m2
		}
		ql = ql[32:]
		is += 2
		u1 <<= 2
		u2 <<= 2
	}
}

func dequantizeIQ4NL(y []float32, blk []byte) {
	d := f16at(blk)
	qs := blk[2:]
	for j := 0; j < QK4_NL/2; j++ {
		y[j] = d * float32(kvaluesIQ4NL[qs[j]&0xF])
		y[j+QK4_NL/2] = d * float32(kvaluesIQ4NL[qs[j]>>4])
	}
}

// dequantizeIQ4XS: eight sub-blocks of 32 with 6-bit scales (biased by 32;
// low 4 bits in scales_l, high 2 in scales_h) over IQ4_NL's levels.
func dequantizeIQ4XS(y []float32, blk []byte) {
	d := f16at(blk)
	scalesH := binary.LittleEndian.Uint16(blk[2:])
	scalesL := blk[4:8]
	qs := blk[8:]
	for ib := 0; ib < QK_K/32; ib++ {
		ls := int((scalesL[ib/2]>>(4*(ib%2)))&0xF) | int((scalesH>>(2*ib))&3)<<4
		dl := d * float32(ls-32)
		for j := 0; j < 16; j++ {
			y[32*ib+j] = dl * float32(kvaluesIQ4NL[qs[j]&0xF])
			y[32*ib+j+16] = dl * float32(kvaluesIQ4NL[qs[j]>>4])
		}
		qs = qs[16:]
	}
}
