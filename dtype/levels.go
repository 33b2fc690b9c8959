package dtype

import "encoding/binary"

// Levels is the integer view of one block that the quantised dot products
// work on: the block's element i is d·Scale[i/G]·V[i] − m·Min[i/G], with G
// the group size (16 for Q2_K, Q3_K and Q6_K; 32 for Q4_K, Q5_K and IQ4_XS;
// the whole 32-element block, scale 1, for the 32-element types). An integer
// dot with activation quants is then Σ_g Scale[g]·Σ_{i∈g} V[i]·q[i], and the
// min term Σ_g Min[g]·Σ_{i∈g} q[i], both exact in int32.
//
// The float values of DequantizeRow equal these up to ggml's rounding order
// (TestLevelsMatchDequantize); the matmul term of each type, built from them,
// is defined in backend/cpu/quant.go.
type Levels struct {
	V          [QK_K]int32
	Scale, Min [QK_K / 16]int32
	D, M       float32 // the f16 scale and min (dmin) as float32; M is 0 without one
	Group      int
}

// Unpack fills l from one block of t (a Quantized type other than Q8_K).
func (l *Levels) Unpack(t Type, blk []byte) {
	blk = blk[:t.BlockBytes()]
	l.M = 0
	switch t {
	case Q8_0:
		l.D, l.Group = f16at(blk), QK8_0
		for j := range QK8_0 {
			l.V[j] = int32(int8(blk[2+j]))
		}
	case Q4_0, Q4_1, IQ4_NL:
		l.D, l.Group = f16at(blk), QK4_0
		qs := blk[2:]
		if t == Q4_1 {
			l.M, qs = f16at(blk[2:]), blk[4:]
		}
		for j := range QK4_0 / 2 {
			lo, hi := int32(qs[j]&0xF), int32(qs[j]>>4)
			switch t {
			case Q4_0:
				lo, hi = lo-8, hi-8
			case IQ4_NL:
				lo, hi = int32(kvaluesIQ4NL[lo]), int32(kvaluesIQ4NL[hi])
			}
			l.V[j], l.V[j+16] = lo, hi
		}
	case Q5_0, Q5_1:
		l.D, l.Group = f16at(blk), QK5_0
		off, hb := int32(16), blk[2:]
		if t == Q5_1 {
			l.M, off, hb = f16at(blk[2:]), 0, blk[4:]
		}
		qh := binary.LittleEndian.Uint32(hb)
		qs := hb[4:]
		for j := range QK5_0 / 2 {
			l.V[j] = int32(qs[j]&0xF) | int32(qh>>j&1)<<4 - off
			l.V[j+16] = int32(qs[j]>>4) | int32(qh>>(j+16)&1)<<4 - off
		}
	case Q2_K:
		l.D, l.M, l.Group = f16at(blk[80:]), f16at(blk[82:]), 16
		for g := range 16 {
			s := blk[g]
			l.Scale[g], l.Min[g] = int32(s&0xF), int32(s>>4)
			// Group g = 8·half128 + 2·shift + h: bytes 32·half128 + 16·h.
			q := blk[16+32*(g/8)+16*(g%2):]
			shift := 2 * (g % 8 / 2)
			for i := range 16 {
				l.V[16*g+i] = int32(q[i] >> shift & 3)
			}
		}
	case Q3_K:
		l.D, l.Group = f16at(blk[108:]), 16
		sc := q3KScales(blk[96:108])
		for g := range 16 {
			l.Scale[g] = int32(sc[g])
			q := blk[32+32*(g/8)+16*(g%2):]
			hm := blk[16*(g%2):]
			shift := 2 * (g % 8 / 2)
			bit := byte(1) << (4*(g/8) + g%8/2)
			for i := range 16 {
				v := int32(q[i] >> shift & 3)
				if hm[i]&bit == 0 {
					v -= 4
				}
				l.V[16*g+i] = v
			}
		}
	case Q4_K, Q5_K:
		l.D, l.M, l.Group = f16at(blk), f16at(blk[2:]), 32
		qs := blk[16:]
		if t == Q5_K {
			qs = blk[48:]
		}
		for j := range 8 {
			s, m := scaleMinK4(j, blk[4:16])
			l.Scale[j], l.Min[j] = int32(s), int32(m)
			q := qs[32*(j/2):]
			for i := range 32 {
				v := int32(q[i] & 0xF)
				if j%2 == 1 {
					v = int32(q[i] >> 4)
				}
				if t == Q5_K {
					v |= int32(blk[16+i]>>j&1) << 4
				}
				l.V[32*j+i] = v
			}
		}
	case Q6_K:
		l.D, l.Group = f16at(blk[208:]), 16
		for g := range 16 {
			l.Scale[g] = int32(int8(blk[192+g]))
		}
		for half := range 2 {
			ql, qh := blk[64*half:], blk[128+32*half:]
			v := l.V[128*half:]
			for i := range 32 {
				h := qh[i]
				v[i] = int32(ql[i]&0xF|(h&3)<<4) - 32
				v[i+32] = int32(ql[i+32]&0xF|(h>>2&3)<<4) - 32
				v[i+64] = int32(ql[i]>>4|(h>>4&3)<<4) - 32
				v[i+96] = int32(ql[i+32]>>4|(h>>6)<<4) - 32
			}
		}
	case IQ4_XS:
		l.D, l.Group = f16at(blk), 32
		scalesH := binary.LittleEndian.Uint16(blk[2:])
		for j := range 8 {
			l.Scale[j] = int32(blk[4+j/2]>>(4*(j%2))&0xF) | int32(scalesH>>(2*j)&3)<<4 - 32
			qs := blk[8+16*j:]
			for i := range 16 {
				l.V[32*j+i] = int32(kvaluesIQ4NL[qs[i]&0xF])
				l.V[32*j+i+16] = int32(kvaluesIQ4NL[qs[i]>>4])
			}
		}
	default:
		panic("dtype: Levels.Unpack: unsupported type " + t.String())
	}
	if l.Group == t.BlockSize() {
		// Q4_1 and Q5_1 add their min (m is the block's smallest value),
		// where the K-quants subtract dmin times a positive 6-bit min.
		l.Scale[0], l.Min[0] = 1, -1
	}

}
