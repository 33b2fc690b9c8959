// Package dtype describes how tensor elements are stored: the plain float
// types and ggml's block-quantised formats, with their byte layouts and the
// reference (scalar, obviously correct) conversions to and from float32.
//
// The numeric values of Type are ggml's type ids, so a GGUF tensor's type
// field converts directly. Backends own the fast paths; the functions here are
// the definition every fast path is tested against.
package dtype

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/x448/float16"
)

// Type is a storage type; its value is the ggml type id.
type Type uint32

// The supported types. Values are ggml's (ggml.h enum ggml_type).
const (
	F32  Type = 0
	F16  Type = 1
	Q4_0 Type = 2
	Q8_0 Type = 8
	Q6_K Type = 14
	I32  Type = 26
	BF16 Type = 30
)

// Block geometry of each type: elements per block and bytes per block.
const (
	QK8_0 = 32 // Q8_0: f16 scale + 32 int8
	QK4_0 = 32 // Q4_0: f16 scale + 16 bytes of nibbles
	QK_K  = 256

	BlockBytesQ8_0 = 2 + QK8_0
	BlockBytesQ4_0 = 2 + QK4_0/2
	BlockBytesQ6_K = QK_K/2 + QK_K/4 + QK_K/16 + 2 // ql, qh, scales, d = 210
)

var names = map[Type]string{F32: "F32", F16: "F16", Q4_0: "Q4_0", Q8_0: "Q8_0", Q6_K: "Q6_K", I32: "I32", BF16: "BF16"}

func (t Type) String() string {
	if s, ok := names[t]; ok {
		return s
	}
	return fmt.Sprintf("ggml_type(%d)", uint32(t))
}

// Valid reports whether t is one of the types glint implements.
func (t Type) Valid() bool { _, ok := names[t]; return ok }

// Parse returns the type named s (as printed by String, case-sensitive).
func Parse(s string) (Type, error) {
	for t, n := range names {
		if n == s {
			return t, nil
		}
	}
	return 0, fmt.Errorf("dtype: unknown type %q", s)
}

// Quantized reports whether t is a block format.
func (t Type) Quantized() bool { return t == Q4_0 || t == Q8_0 || t == Q6_K }

// BlockSize is the number of elements in one block (1 for plain types).
func (t Type) BlockSize() int {
	switch t {
	case Q4_0:
		return QK4_0
	case Q8_0:
		return QK8_0
	case Q6_K, Q8_K:
		return QK_K
	}
	return 1
}

// BlockBytes is the size in bytes of one block.
func (t Type) BlockBytes() int {
	switch t {
	case F32, I32:
		return 4
	case F16, BF16:
		return 2
	case Q4_0:
		return BlockBytesQ4_0
	case Q8_0:
		return BlockBytesQ8_0
	case Q6_K:
		return BlockBytesQ6_K
	}
	return 0
}

// RowBytes is the size of a row of n elements, or an error when n is not a
// whole number of blocks (or t is unknown). Overflow is reported, not wrapped.
func (t Type) RowBytes(n int) (int, error) {
	if !t.Valid() {
		return 0, fmt.Errorf("dtype: unsupported type %v", t)
	}
	bs := t.BlockSize()
	if n < 0 || n%bs != 0 {
		return 0, fmt.Errorf("dtype: %v row of %d elements is not a multiple of the block size %d", t, n, bs)
	}
	blocks := n / bs
	if blocks > math.MaxInt/t.BlockBytes() {
		return 0, fmt.Errorf("dtype: %v row of %d elements overflows", t, n)
	}
	return blocks * t.BlockBytes(), nil
}

// Bytes is the size of a tensor of the given row-major shape (the innermost
// dimension is last and must be whole blocks).
func (t Type) Bytes(shape ...int) (int, error) {
	if len(shape) == 0 {
		return t.RowBytes(1)
	}
	row, err := t.RowBytes(shape[len(shape)-1])
	if err != nil {
		return 0, err
	}
	n := row
	for _, d := range shape[:len(shape)-1] {
		if d < 0 || (d > 0 && n > math.MaxInt/d) {
			return 0, fmt.Errorf("dtype: %v tensor %v overflows", t, shape)
		}
		n *= d
	}
	return n, nil
}

// F16ToF32 and friends are the scalar conversions used everywhere.
func F16ToF32(h uint16) float32  { return float16.Frombits(h).Float32() }
func F32ToF16(f float32) uint16  { return float16.Fromfloat32(f).Bits() }
func BF16ToF32(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// F32ToBF16 rounds to nearest even, as PyTorch and ggml do (NaN stays NaN).
func F32ToBF16(f float32) uint16 {
	u := math.Float32bits(f)
	if u&0x7fffffff > 0x7f800000 {
		return uint16(u>>16) | 0x40
	}
	u += 0x7fff + (u>>16)&1
	return uint16(u >> 16)
}

// DequantizeRow expands one row of n elements stored as t in src into dst.
// It is the reference definition of each format.
func DequantizeRow(t Type, dst []float32, src []byte) {
	n := len(dst)
	switch t {
	case F32:
		for i := range dst {
			dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(src[4*i:]))
		}
	case F16:
		for i := range dst {
			dst[i] = F16ToF32(binary.LittleEndian.Uint16(src[2*i:]))
		}
	case BF16:
		for i := range dst {
			dst[i] = BF16ToF32(binary.LittleEndian.Uint16(src[2*i:]))
		}
	case Q8_0:
		for b := 0; b < n/QK8_0; b++ {
			blk := src[b*BlockBytesQ8_0:]
			d := F16ToF32(binary.LittleEndian.Uint16(blk))
			for j := 0; j < QK8_0; j++ {
				dst[b*QK8_0+j] = d * float32(int8(blk[2+j]))
			}
		}
	case Q4_0:
		for b := 0; b < n/QK4_0; b++ {
			blk := src[b*BlockBytesQ4_0:]
			d := F16ToF32(binary.LittleEndian.Uint16(blk))
			y := dst[b*QK4_0:]
			for j := 0; j < QK4_0/2; j++ {
				q := blk[2+j]
				y[j] = d * float32(int(q&0xF)-8)
				y[j+QK4_0/2] = d * float32(int(q>>4)-8)
			}
		}
	case Q6_K:
		for b := 0; b < n/QK_K; b++ {
			dequantizeQ6K(dst[b*QK_K:(b+1)*QK_K], src[b*BlockBytesQ6_K:(b+1)*BlockBytesQ6_K])
		}
	default:
		panic(fmt.Sprintf("dtype: DequantizeRow: unsupported type %v", t))
	}
}

// dequantizeQ6K follows ggml's dequantize_row_q6_K: a 256-element super-block
// of 6-bit values (low 4 bits in ql, high 2 in qh) with 16 int8 sub-scales.
func dequantizeQ6K(y []float32, blk []byte) {
	ql := blk[0:128]
	qh := blk[128:192]
	sc := blk[192:208]
	d := F16ToF32(binary.LittleEndian.Uint16(blk[208:]))
	for n := 0; n < QK_K; n += 128 {
		for l := 0; l < 32; l++ {
			is := l / 16
			q1 := int(ql[l]&0xF|((qh[l]>>0)&3)<<4) - 32
			q2 := int(ql[l+32]&0xF|((qh[l]>>2)&3)<<4) - 32
			q3 := int(ql[l]>>4|((qh[l]>>4)&3)<<4) - 32
			q4 := int(ql[l+32]>>4|((qh[l]>>6)&3)<<4) - 32
			y[n+l] = d * float32(int8(sc[is])) * float32(q1)
			y[n+l+32] = d * float32(int8(sc[is+2])) * float32(q2)
			y[n+l+64] = d * float32(int8(sc[is+4])) * float32(q3)
			y[n+l+96] = d * float32(int8(sc[is+6])) * float32(q4)
		}
		ql = ql[64:]
		qh = qh[32:]
		sc = sc[8:]
	}
}
