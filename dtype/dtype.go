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
	"strings"

	"github.com/x448/float16"
)

// Type is a storage type; its value is the ggml type id.
type Type uint32

// The types dtype knows the layout of. Values are ggml's (ggml.h enum
// ggml_type).
const (
	F32    Type = 0
	F16    Type = 1
	Q4_0   Type = 2
	Q4_1   Type = 3
	Q5_0   Type = 6
	Q5_1   Type = 7
	Q8_0   Type = 8
	Q2_K   Type = 10
	Q3_K   Type = 11
	Q4_K   Type = 12
	Q5_K   Type = 13
	Q6_K   Type = 14
	IQ4_NL Type = 20
	IQ4_XS Type = 23
	I32    Type = 26
	BF16   Type = 30
)

// Block geometry of each type: elements per block and bytes per block.
const (
	QK8_0  = 32 // Q8_0: f16 scale + 32 int8
	QK4_0  = 32 // Q4_0: f16 scale + 16 bytes of nibbles
	QK4_1  = 32 // Q4_1: f16 scale and min + 16 bytes of nibbles
	QK5_0  = 32 // Q5_0: f16 scale + 32 high bits + 16 bytes of nibbles
	QK5_1  = 32 // Q5_1: f16 scale and min + 32 high bits + 16 bytes of nibbles
	QK4_NL = 32 // IQ4_NL: f16 scale + 16 bytes of indices into kvaluesIQ4NL
	QK_K   = 256

	BlockBytesQ8_0   = 2 + QK8_0
	BlockBytesQ4_0   = 2 + QK4_0/2
	BlockBytesQ4_1   = 4 + QK4_1/2
	BlockBytesQ5_0   = 2 + 4 + QK5_0/2
	BlockBytesQ5_1   = 4 + 4 + QK5_1/2
	BlockBytesQ2_K   = QK_K/16 + QK_K/4 + 4          // scales, qs, d, dmin = 84
	BlockBytesQ3_K   = QK_K/8 + QK_K/4 + 12 + 2      // hmask, qs, scales, d = 110
	BlockBytesQ4_K   = 4 + 12 + QK_K/2               // d, dmin, scales, qs = 144
	BlockBytesQ5_K   = 4 + 12 + QK_K/8 + QK_K/2      // d, dmin, scales, qh, qs = 176
	BlockBytesQ6_K   = QK_K/2 + QK_K/4 + QK_K/16 + 2 // ql, qh, scales, d = 210
	BlockBytesIQ4_NL = 2 + QK4_NL/2
	BlockBytesIQ4_XS = 2 + 2 + QK_K/64 + QK_K/2 // d, scales_h, scales_l, qs = 136
)

// ggmlNames is every ggml type id, named as ggml names it (enum ggml_type
// without its GGML_TYPE_ prefix), so that no message ever shows a bare
// number; ids ggml retired keep their old names.
var ggmlNames = [...]string{
	"F32", "F16", "Q4_0", "Q4_1", "Q4_2", "Q4_3", "Q5_0", "Q5_1", "Q8_0", "Q8_1",
	"Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "Q8_K", "IQ2_XXS", "IQ2_XS", "IQ3_XXS", "IQ1_S",
	"IQ4_NL", "IQ3_S", "IQ2_S", "IQ4_XS", "I8", "I16", "I32", "I64", "F64", "IQ1_M",
	"BF16", "Q4_0_4_4", "Q4_0_4_8", "Q4_0_8_8", "TQ1_0", "TQ2_0", "IQ4_NL_4_4", "IQ4_NL_4_8", "IQ4_NL_8_8",
}

// geometry is each known type's elements and bytes per block.
var geometry = map[Type][2]int{
	F32: {1, 4}, F16: {1, 2}, BF16: {1, 2}, I32: {1, 4},
	Q4_0: {QK4_0, BlockBytesQ4_0}, Q4_1: {QK4_1, BlockBytesQ4_1},
	Q5_0: {QK5_0, BlockBytesQ5_0}, Q5_1: {QK5_1, BlockBytesQ5_1},
	Q8_0: {QK8_0, BlockBytesQ8_0},
	Q2_K: {QK_K, BlockBytesQ2_K}, Q3_K: {QK_K, BlockBytesQ3_K}, Q4_K: {QK_K, BlockBytesQ4_K},
	Q5_K: {QK_K, BlockBytesQ5_K}, Q6_K: {QK_K, BlockBytesQ6_K},
	IQ4_NL: {QK4_NL, BlockBytesIQ4_NL}, IQ4_XS: {QK_K, BlockBytesIQ4_XS},
}

// String is ggml's name of the type; an id ggml never had prints as
// ggml_type(N).
func (t Type) String() string {
	if int(t) < len(ggmlNames) {
		return ggmlNames[t]
	}
	return fmt.Sprintf("ggml_type(%d)", uint32(t))
}

// Known reports whether dtype knows t's layout: its block geometry,
// DequantizeRow and QuantizeRow. Files of every known type can be read,
// written and converted.
func (t Type) Known() bool { _, ok := geometry[t]; return ok }

// Valid reports whether t is a type the backends implement: every Known one.
// The backends gate tensors on it, so a type with no layout here is refused
// there with an error naming it rather than reaching a kernel.
func (t Type) Valid() bool { return t.Known() }

// KnownTypes lists the known types in id order.
func KnownTypes() []Type {
	var ts []Type
	for i := range ggmlNames {
		if Type(i).Known() {
			ts = append(ts, Type(i))
		}
	}
	return ts
}

// KnownNames is the known types' names, comma-separated, for messages.
func KnownNames() string {
	var s []string
	for _, t := range KnownTypes() {
		s = append(s, t.String())
	}
	return strings.Join(s, ", ")
}

// Parse returns the known type named s (as printed by String, case-sensitive).
func Parse(s string) (Type, error) {
	for _, t := range KnownTypes() {
		if t.String() == s {
			return t, nil
		}
	}
	return 0, fmt.Errorf("dtype: unknown type %q (known: %s)", s, KnownNames())
}

// Quantized reports whether t is a block format.
func (t Type) Quantized() bool { return t.Known() && t.BlockSize() > 1 }

// BlockSize is the number of elements in one block (1 for plain types).
func (t Type) BlockSize() int {
	switch t {
	case Q8_K:
		return QK_K
	case Q8_1:
		return QK8_0
	}

	if g, ok := geometry[t]; ok {
		return g[0]
	}
	return 1
}

// BlockBytes is the size in bytes of one block (0 for an unknown type).
func (t Type) BlockBytes() int { return geometry[t][1] }

// RowBytes is the size of a row of n elements, or an error when n is not a
// whole number of blocks (or t is unknown). Overflow is reported, not wrapped.
func (t Type) RowBytes(n int) (int, error) {
	if !t.Known() {
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
	case Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, IQ4_NL, IQ4_XS:
		bs, bb := t.BlockSize(), t.BlockBytes()
		dq := dequantizers[t]
		for b := 0; b < n/bs; b++ {
			dq(dst[b*bs:(b+1)*bs], src[b*bb:(b+1)*bb])
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
