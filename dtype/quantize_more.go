package dtype

import (
	"encoding/binary"
	"math"
)

// The quantisers in this file are ggml's reference ones, those llama-quantize
// runs without an importance matrix: quantize_row_{q4_1,q5_0,q5_1,q2_K,q3_K,
// q4_K,q5_K}_ref, and quantize_iq4_nl / quantize_iq4_xs with no weights
// (ntry 7, which is not what their _ref wrappers do). As in quantize.go,
// every float32 product is converted explicitly so that Go cannot fuse it
// into a multiply-add: ggml-quants.c is built without FMA (ggml-base gets no
// -march flags), so each operation rounds on its own, in C's order.

// blockQuantizers maps the types of this file to their one-block quantisers.
var blockQuantizers = map[Type]func(blk []byte, x []float32){
	Q4_1:   quantizeQ4_1,
	Q5_0:   quantizeQ5_0,
	Q5_1:   quantizeQ5_1,
	Q2_K:   quantizeQ2K,
	Q3_K:   quantizeQ3K,
	Q4_K:   quantizeQ4K,
	Q5_K:   quantizeQ5K,
	IQ4_NL: quantizeIQ4NL,
	IQ4_XS: quantizeIQ4XS,
}

func putF16(b []byte, f float32) { binary.LittleEndian.PutUint16(b, F32ToF16(f)) }

// minMax is the smallest and largest element, starting from ±FLT_MAX as
// q4_1 and q5_1 do.
func minMax(x []float32) (mn, mx float32) {
	mn, mx = math.MaxFloat32, -math.MaxFloat32
	for _, v := range x {
		if v < mn {
			mn = v
		}
		if v > mx {
			mx = v
		}
	}
	return mn, mx
}

// signedMax is the element of largest magnitude with its sign (the first
// on ties) and that magnitude: the scale of Q4_0, Q5_0, Q8_K and the
// K-quants' sub-blocks.
func signedMax(x []float32) (mx, amax float32) {
	for _, v := range x {
		if a := abs32(v); a > amax {
			amax, mx = a, v
		}
	}
	return mx, amax
}

func quantizeQ4_1(blk []byte, x []float32) {
	mn, mx := minMax(x)
	d := float32(float32(mx-mn) / 15)
	var id float32
	if d != 0 {
		id = float32(1 / d)
	}
	putF16(blk, d)
	putF16(blk[2:], mn)
	for j := 0; j < QK4_1/2; j++ {
		x0 := float32(float32(x[j]-mn) * id)
		x1 := float32(float32(x[j+QK4_1/2]-mn) * id)
		q0 := min(15, int8(float32(x0+0.5)))
		q1 := min(15, int8(float32(x1+0.5)))
		blk[4+j] = byte(q0) | byte(q1)<<4
	}
}

func quantizeQ5_0(blk []byte, x []float32) {
	mx, _ := signedMax(x)
	d := float32(mx / -16)
	var id float32
	if d != 0 {
		id = float32(1 / d)
	}
	putF16(blk, d)
	var qh uint32
	for j := 0; j < QK5_0/2; j++ {
		x0 := float32(x[j] * id)
		x1 := float32(x[j+QK5_0/2] * id)
		q0 := byte(min(31, int8(float32(x0+16.5))))
		q1 := byte(min(31, int8(float32(x1+16.5))))
		blk[6+j] = q0&0xF | (q1&0xF)<<4
		qh |= uint32(q0&0x10>>4) << j
		qh |= uint32(q1&0x10>>4) << (j + QK5_0/2)
	}
	binary.LittleEndian.PutUint32(blk[2:], qh)
}

func quantizeQ5_1(blk []byte, x []float32) {
	mn, mx := minMax(x)
	d := float32(float32(mx-mn) / 31)
	var id float32
	if d != 0 {
		id = float32(1 / d)
	}
	putF16(blk, d)
	putF16(blk[2:], mn)
	var qh uint32
	for j := 0; j < QK5_1/2; j++ {
		x0 := float32(float32(x[j]-mn) * id)
		x1 := float32(float32(x[j+QK5_1/2]-mn) * id)
		q0 := uint8(float32(x0 + 0.5))
		q1 := uint8(float32(x1 + 0.5))
		blk[8+j] = q0&0xF | (q1&0xF)<<4
		qh |= uint32(q0&0x10>>4) << j
		qh |= uint32(q1&0x10>>4) << (j + QK5_1/2)
	}
	binary.LittleEndian.PutUint32(blk[4:], qh)
}

// makeQkx2Quants is ggml's make_qkx2_quants: levels 0…nmax with a scale and
// a non-positive offset (returned negated, as the_min), chosen from nstep+1
// trial scales by the weighted squared (or absolute, useMad) error.
func makeQkx2Quants(nmax int, x, weights []float32, L, Laux []uint8, rmin, rdelta float32, nstep int, useMad bool) (scale, theMin float32) {
	n := len(x)
	mn, mx := x[0], x[0]
	sumW := weights[0]
	sumX := float32(sumW * x[0])
	for i := 1; i < n; i++ {
		if x[i] < mn {
			mn = x[i]
		}
		if x[i] > mx {
			mx = x[i]
		}
		w := weights[i]
		sumW += w
		sumX += float32(w * x[i])
	}
	if mn > 0 {
		mn = 0
	}
	if mx == mn {
		clear(L[:n])
		return 0, -mn
	}
	fnmax := float32(nmax)
	iscale := float32(fnmax / float32(mx-mn))
	scale = float32(1 / iscale)
	errOf := func(diff float32) float32 {
		if useMad {
			return abs32(diff)
		}
		return float32(diff * diff)
	}
	var bestMad float32
	for i := 0; i < n; i++ {
		l := nearestInt(float32(iscale * float32(x[i]-mn)))
		L[i] = uint8(max(0, min(nmax, l)))
		diff := float32(float32(float32(scale*float32(L[i]))+mn) - x[i])
		bestMad += float32(weights[i] * errOf(diff))
	}
	if nstep < 1 {
		return scale, -mn
	}
	for is := 0; is <= nstep; is++ {
		iscale = float32(float32(float32(rmin+float32(rdelta*float32(is)))+fnmax) / float32(mx-mn))
		var sumL, sumL2, sumXL float32
		for i := 0; i < n; i++ {
			l := nearestInt(float32(iscale * float32(x[i]-mn)))
			l = max(0, min(nmax, l))
			Laux[i] = uint8(l)
			w, fl := weights[i], float32(l)
			sumL += float32(w * fl)
			sumL2 += float32(float32(w*fl) * fl)
			sumXL += float32(float32(w*fl) * x[i])
		}
		D := float32(float32(sumW*sumL2) - float32(sumL*sumL))
		if D > 0 {
			thisScale := float32(float32(float32(sumW*sumXL)-float32(sumX*sumL)) / D)
			thisMin := float32(float32(float32(sumL2*sumX)-float32(sumL*sumXL)) / D)
			if thisMin > 0 {
				thisMin = 0
				thisScale = float32(sumXL / sumL2)
			}
			var mad float32
			for i := 0; i < n; i++ {
				diff := float32(float32(float32(thisScale*float32(Laux[i]))+thisMin) - x[i])
				mad += float32(weights[i] * errOf(diff))
			}
			if mad < bestMad {
				copy(L[:n], Laux[:n])
				bestMad = mad
				scale = thisScale
				mn = thisMin
			}
		}
	}
	return scale, -mn
}

// makeQ3Quants is ggml's make_q3_quants with do_rmse: levels -nmax…nmax-1
// from the largest-magnitude element, then up to 5 passes that move single
// levels while that improves the x²-weighted fit. L receives levels offset
// by nmax.
func makeQ3Quants(nmax int, x []float32, L []int8) float32 {
	n := len(x)
	mx, amax := signedMax(x)
	if amax < groupMaxEps {
		clear(L[:n])
		return 0
	}
	iscale := float32(-float32(nmax) / mx)
	var sumlx, suml2 float32
	for i := 0; i < n; i++ {
		l := nearestInt(float32(iscale * x[i]))
		l = max(-nmax, min(nmax-1, l))
		L[i] = int8(l)
		w, fl := float32(x[i]*x[i]), float32(l)
		sumlx += float32(float32(w*x[i]) * fl)
		suml2 += float32(float32(w*fl) * fl)
	}
	for itry := 0; itry < 5; itry++ {
		changed := 0
		for i := 0; i < n; i++ {
			w, li := float32(x[i]*x[i]), float32(L[i])
			slx := float32(sumlx - float32(float32(w*x[i])*li))
			if slx > 0 {
				sl2 := float32(suml2 - float32(float32(w*li)*li))
				newL := nearestInt(float32(float32(x[i]*sl2) / slx))
				newL = max(-nmax, min(nmax-1, newL))
				if newL != int(L[i]) {
					fn := float32(newL)
					slx += float32(float32(w*x[i]) * fn)
					sl2 += float32(float32(w*fn) * fn)
					if sl2 > 0 && float32(float32(slx*slx)*suml2) > float32(float32(sumlx*sumlx)*sl2) {
						L[i] = int8(newL)
						sumlx, suml2 = slx, sl2
						changed++
					}
				}
			}
		}
		if changed == 0 {
			break
		}
	}
	for i := 0; i < n; i++ {
		L[i] += int8(nmax)
	}
	return float32(sumlx / suml2)
}

// packLow2 stores 2-bit levels the way Q2_K and Q3_K do: byte l of each
// 32-byte group holds elements l, l+32, l+64 and l+96 of its 128.
func packLow2[T int8 | uint8](qs []byte, L []T) {
	for j := 0; j < QK_K; j += 128 {
		for l := 0; l < 32; l++ {
			qs[j/4+l] = byte(L[j+l]) | byte(L[j+l+32])<<2 | byte(L[j+l+64])<<4 | byte(L[j+l+96])<<6
		}
	}
}

func quantizeQ2K(blk []byte, x []float32) {
	var L [QK_K]uint8
	var Laux [16]uint8
	var weights [16]float32
	var mins, scales [QK_K / 16]float32
	const q4scale = 15
	var maxScale, maxMin float32
	for j := 0; j < QK_K/16; j++ {
		xs := x[16*j : 16*j+16]
		for l, v := range xs {
			weights[l] = abs32(v)
		}
		scales[j], mins[j] = makeQkx2Quants(3, xs, weights[:], L[16*j:16*j+16], Laux[:], -0.5, 0.1, 15, true)
		maxScale = max32(maxScale, scales[j])
		maxMin = max32(maxMin, mins[j])
	}
	sc := blk[0:16]
	if maxScale > 0 {
		iscale := float32(q4scale / maxScale)
		for j := range scales {
			sc[j] = uint8(nearestInt(float32(iscale * scales[j])))
		}
		putF16(blk[80:], float32(maxScale/q4scale))
	} else {
		clear(sc)
		putF16(blk[80:], 0)
	}
	if maxMin > 0 {
		iscale := float32(q4scale / maxMin)
		for j := range mins {
			sc[j] |= uint8(nearestInt(float32(iscale*mins[j])) << 4)
		}
		putF16(blk[82:], float32(maxMin/q4scale))
	} else {
		putF16(blk[82:], 0)
	}
	dAll, dminAll := f16at(blk[80:]), f16at(blk[82:])
	for j := 0; j < QK_K/16; j++ {
		d := float32(dAll * float32(sc[j]&0xF))
		if d == 0 {
			continue
		}
		dm := float32(dminAll * float32(sc[j]>>4))
		for ii := 0; ii < 16; ii++ {
			l := nearestInt(float32(float32(x[16*j+ii]+dm) / d))
			L[16*j+ii] = uint8(max(0, min(3, l)))
		}
	}
	packLow2(blk[16:80], L[:])
}

// max32 is C's `if (v > m) m = v`: unlike the builtin max it keeps m when v
// is NaN.
func max32(m, v float32) float32 {
	if v > m {
		return v
	}
	return m
}

func quantizeQ3K(blk []byte, x []float32) {
	var L [QK_K]int8
	var scales [QK_K / 16]float32
	var maxScale, amax float32
	for j := 0; j < QK_K/16; j++ {
		scales[j] = makeQ3Quants(4, x[16*j:16*j+16], L[16*j:16*j+16])
		if a := abs32(scales[j]); a > amax {
			amax, maxScale = a, scales[j]
		}
	}
	hmask := blk[0:32]
	qs := blk[32:96]
	sc := blk[96:108]
	clear(sc)
	if maxScale != 0 {
		iscale := float32(-32 / maxScale)
		for j := 0; j < QK_K/16; j++ {
			l := int8(nearestInt(float32(iscale * scales[j])))
			l = max(-32, min(31, l)) + 32
			if j < 8 {
				sc[j] = byte(l) & 0xF
			} else {
				sc[j-8] |= (byte(l) & 0xF) << 4
			}
			l >>= 4
			sc[j%4+8] |= byte(l) << (2 * (j / 4))
		}
		putF16(blk[108:], float32(1/iscale))
	} else {
		putF16(blk[108:], 0)
	}
	dAll := f16at(blk[108:])
	unpacked := q3KScales(sc)
	for j := 0; j < QK_K/16; j++ {
		d := float32(dAll * float32(unpacked[j]))
		if d == 0 {
			continue
		}
		for ii := 0; ii < 16; ii++ {
			l := nearestInt(float32(x[16*j+ii] / d))
			L[16*j+ii] = int8(max(-4, min(3, l)) + 4)
		}
	}
	clear(hmask)
	m, hm := 0, byte(1)
	for j := 0; j < QK_K; j++ {
		if L[j] > 3 {
			hmask[m] |= hm
			L[j] -= 4
		}
		if m++; m == QK_K/8 {
			m, hm = 0, hm<<1
		}
	}
	packLow2(qs, L[:])
}

// quantizeKx2 is the body shared by quantize_row_q4_K_ref and
// quantize_row_q5_K_ref: eight sub-blocks of 32 fitted by make_qkx2_quants
// with weights av_x + |x|, their scales and mins quantised to 6 bits against
// f16 d and dmin, then the levels (0…nmax) re-fitted to the rounded scales.
func quantizeKx2(blk []byte, x []float32, nmax int, rmin float32, nstep int, L *[QK_K]uint8) {
	var Laux [32]uint8
	var weights [32]float32
	var mins, scales [QK_K / 32]float32
	var maxScale, maxMin float32
	for j := 0; j < QK_K/32; j++ {
		xs := x[32*j : 32*j+32]
		var sumX2 float32
		for _, v := range xs {
			sumX2 += float32(v * v)
		}
		avX := float32(math.Sqrt(float64(float32(sumX2 / 32))))
		for l, v := range xs {
			weights[l] = float32(avX + abs32(v))
		}
		scales[j], mins[j] = makeQkx2Quants(nmax, xs, weights[:], L[32*j:32*j+32], Laux[:], rmin, 0.1, nstep, false)
		maxScale = max32(maxScale, scales[j])
		maxMin = max32(maxMin, mins[j])
	}
	var invScale, invMin float32
	if maxScale > 0 {
		invScale = float32(63 / maxScale)
	}
	if maxMin > 0 {
		invMin = float32(63 / maxMin)
	}
	sc := blk[4:16]
	for j := 0; j < QK_K/32; j++ {
		ls := min(63, uint8(nearestInt(float32(invScale*scales[j]))))
		lm := min(63, uint8(nearestInt(float32(invMin*mins[j]))))
		if j < 4 {
			sc[j] = ls
			sc[j+4] = lm
		} else {
			sc[j+4] = ls&0xF | (lm&0xF)<<4
			sc[j-4] |= (ls >> 4) << 6
			sc[j] |= (lm >> 4) << 6
		}
	}
	putF16(blk, float32(maxScale/63))
	putF16(blk[2:], float32(maxMin/63))
	dAll, dminAll := f16at(blk), f16at(blk[2:])
	for j := 0; j < QK_K/32; j++ {
		s, m := scaleMinK4(j, sc)
		d := float32(dAll * float32(s))
		if d == 0 {
			continue
		}
		dm := float32(dminAll * float32(m))
		for ii := 0; ii < 32; ii++ {
			l := nearestInt(float32(float32(x[32*j+ii]+dm) / d))
			L[32*j+ii] = uint8(max(0, min(nmax, l)))
		}
	}
}

func quantizeQ4K(blk []byte, x []float32) {
	var L [QK_K]uint8
	quantizeKx2(blk, x, 15, -1, 20, &L)
	q := blk[16:]
	for j := 0; j < QK_K; j += 64 {
		for l := 0; l < 32; l++ {
			q[l] = L[j+l] | L[j+l+32]<<4
		}
		q = q[32:]
	}
}

func quantizeQ5K(blk []byte, x []float32) {
	var L [QK_K]uint8
	quantizeKx2(blk, x, 31, -0.5, 15, &L)
	qh := blk[16:48]
	ql := blk[48:]
	clear(qh)
	m1, m2 := byte(1), byte(2)
	for n := 0; n < QK_K; n += 64 {
		for j := 0; j < 32; j++ {
			l1, l2 := L[n+j], L[n+j+32]
			if l1 > 15 {
				l1 -= 16
				qh[j] |= m1
			}
			if l2 > 15 {
				l2 -= 16
				qh[j] |= m2
			}
			ql[j] = l1 | l2<<4
		}
		m1 <<= 2
		m2 <<= 2
		ql = ql[32:]
	}
}

// bestIndexInt8 is ggml's best_index_int8: the index of the level in the
// sorted table val nearest to x (the upper one on an exact tie).
func bestIndexInt8(val *[16]int8, x float32) int {
	if x <= float32(val[0]) {
		return 0
	}
	if x >= float32(val[15]) {
		return 15
	}
	ml, mu := 0, 15
	for mu-ml > 1 {
		mav := (ml + mu) / 2
		if x < float32(val[mav]) {
			mu = mav
		} else {
			ml = mav
		}
	}
	if float32(x-float32(val[mu-1])) < float32(float32(val[mu])-x) {
		return mu - 1
	}
	return mu
}

// iq4Fit is the per-32 search of ggml's quantize_row_iq4_nl_impl with no
// importance weights and ntry 7 (what quantize_iq4_nl and quantize_iq4_xs
// pass): the scale from the largest-magnitude element, then 15 trial scales
// around it, keeping the best x²-weighted fit. It returns 0 for a block
// below GROUP_MAX_EPS.
func iq4Fit(xb []float32) float32 {
	const ntry = 7
	var weight [32]float32
	for j, v := range xb {
		weight[j] = float32(v * v)
	}
	mx, amax := signedMax(xb)
	if amax < groupMaxEps {
		return 0
	}
	v0 := float32(kvaluesIQ4NL[0])
	d := float32(-mx / v0)
	id := float32(1 / d)
	var sumqx, sumq2 float32
	for j, v := range xb {
		q := float32(kvaluesIQ4NL[bestIndexInt8(&kvaluesIQ4NL, float32(id*v))])
		sumqx += float32(float32(weight[j]*q) * v)
		sumq2 += float32(float32(weight[j]*q) * q)
	}
	d = float32(sumqx / sumq2)
	best := float32(d * sumqx)
	for itry := -ntry; itry <= ntry; itry++ {
		id = float32(float32(itry+int(kvaluesIQ4NL[0])) / mx)
		sumqx, sumq2 = 0, 0
		for j, v := range xb {
			q := float32(kvaluesIQ4NL[bestIndexInt8(&kvaluesIQ4NL, float32(id*v))])
			sumqx += float32(float32(weight[j]*q) * v)
			sumq2 += float32(float32(weight[j]*q) * q)
		}
		if sumq2 > 0 && float32(sumqx*sumqx) > float32(best*sumq2) {
			d = float32(sumqx / sumq2)
			best = float32(d * sumqx)
		}
	}
	return d
}

// packIQ4 stores indices as IQ4 does: byte j of each 16 holds elements j
// (low nibble) and j+16 (high) of its 32.
func packIQ4(q4 []byte, L []uint8) {
	for i := 0; i < len(L)/32; i++ {
		for j := 0; j < 16; j++ {
			q4[16*i+j] = L[32*i+j] | L[32*i+16+j]<<4
		}
	}
}

func quantizeIQ4NL(blk []byte, x []float32) {
	var L [QK4_NL]uint8
	scale := iq4Fit(x)
	putF16(blk, scale)
	var id float32
	if scale != 0 {
		id = float32(1 / scale)
	}
	for j, v := range x {
		L[j] = uint8(bestIndexInt8(&kvaluesIQ4NL, float32(id*v)))
	}
	packIQ4(blk[2:], L[:])
}

func quantizeIQ4XS(blk []byte, x []float32) {
	var L [QK_K]uint8
	var scales [QK_K / 32]float32
	var maxScale, amaxScale float32
	for ib := range scales {
		scales[ib] = iq4Fit(x[32*ib : 32*ib+32])
		if a := abs32(scales[ib]); a > amaxScale {
			amaxScale, maxScale = a, scales[ib]
		}
	}
	d := float32(-maxScale / 32)
	putF16(blk, d)
	var id float32
	if d != 0 {
		id = float32(1 / d)
	}
	var scalesH uint16
	scalesL := blk[4:8]
	for ib := range scales {
		l := nearestInt(float32(id * scales[ib]))
		l = max(-32, min(31, l))
		dl := float32(d * float32(l))
		var idl float32
		if dl != 0 {
			idl = float32(1 / dl)
		}
		for j, v := range x[32*ib : 32*ib+32] {
			L[32*ib+j] = uint8(bestIndexInt8(&kvaluesIQ4NL, float32(idl*v)))
		}
		l += 32
		lo, hi := uint8(l&0xF), uint16(l>>4)
		if ib%2 == 0 {
			scalesL[ib/2] = lo
		} else {
			scalesL[ib/2] |= lo << 4
		}
		scalesH |= hi << (2 * (ib % 8))
	}
	binary.LittleEndian.PutUint16(blk[2:], scalesH)
	packIQ4(blk[8:], L[:])
}
