package cpu

import "github.com/glint-llm/glint/dtype"

// Q4_0 weights of a multiple of 8 rows meet activations in ggml's repacked
// order (dotQ4_0Repacked): one float per output, fed each block's exact
// integer sum. At every SIMD level the backend keeps
// such a weight with each group of 8 rows interleaved block by block, as
// ggml's repacking does, so that one 32-byte load holds four bytes of
// nibbles of each of the 8 rows, one row per 32-bit lane:
//
//	group g (rows 8g…8g+7) starts where row 8g starts in the file layout;
//	its block b, 144 bytes at 144·b, is the 8 rows' f16 scales (row 8g
//	first) and then, for j = 0…3, bytes 4j…4j+3 of each row's 16 bytes of
//	nibbles, row 8g first.
//
// The kernel (simd.c, q4x8_tile) then multiplies each lane by an activation
// word broadcast to all lanes and adds the products lane by lane, leaving
// the 8 rows' block sums in the 8 lanes of one register with no horizontal
// additions, which in the file layout cost three vphaddw per token and
// block, the most expensive instruction of that kernel on AMD's cores. The
// scales come in one load, and a thread's share of the weight is one
// contiguous stream. Integer sums are exact in any order, so the bits are
// those of the file layout's kernel.
const (
	q4x8Rows  = 8
	q4x8Block = q4x8Rows * dtype.BlockBytesQ4_0
)

// interleavesQ4_0 reports whether a backend at level l stores a weight of
// type dt and shape as Q4_0 in groups of eight rows.
func interleavesQ4_0(l simdLevel, dt dtype.Type, shape []int) bool {
	return l >= simdAVX2 && dt == dtype.Q4_0 && len(shape) == 2 && shape[0]%q4x8Rows == 0
}

// interleaveQ4_0 writes row groups g0…g1-1 of the file-layout weight src
// (rows of rowBytes) into dst in the interleaved layout.
func interleaveQ4_0(dst, src []byte, rowBytes, g0, g1 int) {
	nb := rowBytes / dtype.BlockBytesQ4_0
	for g := g0; g < g1; g++ {
		base := g * q4x8Rows * rowBytes
		for r := range q4x8Rows {
			row := src[base+r*rowBytes : base+(r+1)*rowBytes]
			for b := range nb {
				blk := (*[dtype.BlockBytesQ4_0]byte)(row[b*dtype.BlockBytesQ4_0:])
				out := (*[q4x8Block]byte)(dst[base+b*q4x8Block:])
				out[2*r], out[2*r+1] = blk[0], blk[1]
				*(*[4]byte)(out[16+4*r:]) = *(*[4]byte)(blk[2:])
				*(*[4]byte)(out[48+4*r:]) = *(*[4]byte)(blk[6:])
				*(*[4]byte)(out[80+4*r:]) = *(*[4]byte)(blk[10:])
				*(*[4]byte)(out[112+4*r:]) = *(*[4]byte)(blk[14:])
			}
		}
	}
}

// rowQ4_0x8 writes row r of an interleaved weight (data, rows of rowBytes)
// into dst in the file layout.
func rowQ4_0x8(dst, data []byte, rowBytes, r int) {
	nb := rowBytes / dtype.BlockBytesQ4_0
	g, i := r/q4x8Rows, r%q4x8Rows
	base := g * q4x8Rows * rowBytes
	for b := range nb {
		in := (*[q4x8Block]byte)(data[base+b*q4x8Block:])
		blk := (*[dtype.BlockBytesQ4_0]byte)(dst[b*dtype.BlockBytesQ4_0:])
		blk[0], blk[1] = in[2*i], in[2*i+1]
		for j := range 4 {
			*(*[4]byte)(blk[2+4*j:]) = *(*[4]byte)(in[16+32*j+4*i:])
		}
	}
}
