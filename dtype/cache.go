package dtype

import (
	"encoding/binary"
	"fmt"
)

// CacheTypes are the types a KV cache may be stored in besides F32 and F16
// (llama.cpp's --cache-type-k/-v: bf16 and the 32-element block types).
var CacheTypes = []Type{BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL}

// QuantizeCacheRow stores the row src as t in dst as llama.cpp's CPU
// backend stores a KV-cache row: its copy of F32 into a cache type runs the
// type's from_float (ggml-cpu.c's type_traits_cpu), which is not always the
// reference quantiser QuantizeRow is:
//
//   - Q8_0: the x86 quantize_row_q8_0, d = f16(amax/127) and q = x·(127/amax)
//     rounded half to even (the activations' rounding, RoundActivations),
//     where the reference multiplies by 1/d and rounds half away from zero;
//   - IQ4_NL: quantize_row_iq4_nl_ref, quantize_row_iq4_nl_impl with ntry
//     −1: one fit from the scale max/−127, no trial scales (the file
//     quantiser tries 15);
//   - BF16, Q4_0, Q4_1, Q5_0, Q5_1: the reference (F16 too).
//
// dst must hold exactly t.RowBytes(len(src)) bytes; other types panic, as
// QuantizeRow does.
func QuantizeCacheRow(t Type, dst []byte, src []float32) {
	switch t {
	case Q8_0:
		checkRow(t, dst, src)
		for b := 0; b < len(src)/QK8_0; b++ {
			blk, x := dst[b*BlockBytesQ8_0:(b+1)*BlockBytesQ8_0], src[b*QK8_0:(b+1)*QK8_0]
			d, id := Q8_0Scale(x)
			binary.LittleEndian.PutUint16(blk, F32ToF16(d))
			for j, v := range x {
				blk[2+j] = byte(int8(RoundEven(v * id)))
			}
		}
	case IQ4_NL:
		checkRow(t, dst, src)
		for b := 0; b < len(src)/QK4_NL; b++ {
			quantizeIQ4NLRow(dst[b*BlockBytesIQ4_NL:(b+1)*BlockBytesIQ4_NL], src[b*QK4_NL:(b+1)*QK4_NL])
		}
	default:
		QuantizeRow(t, dst, src)
	}
}

func checkRow(t Type, dst []byte, src []float32) {
	want, err := t.RowBytes(len(src))
	if err != nil {
		panic(fmt.Sprintf("dtype: QuantizeCacheRow: %v", err))
	}
	if len(dst) != want {
		panic(fmt.Sprintf("dtype: QuantizeCacheRow: %v row of %d elements needs %d bytes, dst has %d", t, len(src), want, len(dst)))
	}
}

// quantizeIQ4NLRow is quantize_row_iq4_nl_impl(32, 32, …, ntry −1) for one
// block: d = max/−127 (the sign ntry ≤ 0 gives), levels nearest x/d, then
// the x²-weighted least-squares scale of those levels, stored without a
// second pass over the levels. A block below GROUP_MAX_EPS stores scale 0
// and level 0 everywhere (ggml leaves the levels of its stack buffer there;
// they dequantise to 0 either way).
func quantizeIQ4NLRow(blk []byte, x []float32) {
	var L [QK4_NL]uint8
	mx, amax := signedMax(x)
	var d float32
	if amax >= groupMaxEps {
		d = float32(mx / float32(kvaluesIQ4NL[0]))
		id := float32(1 / d)
		var sumqx, sumq2 float32
		for j, v := range x {
			l := bestIndexInt8(&kvaluesIQ4NL, float32(id*v))
			L[j] = uint8(l)
			q := float32(kvaluesIQ4NL[l])
			w := float32(v * v)
			sumqx += float32(float32(w*q) * v)
			sumq2 += float32(float32(w*q) * q)
		}
		d = float32(sumqx / sumq2)
	}
	putF16(blk, d)
	packIQ4(blk[2:], L[:])
}
