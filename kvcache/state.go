package kvcache

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/glint-llm/glint/backend"
	"github.com/glint-llm/glint/dtype"
)

// A sequence's state (llama_state_seq_get_data's counterpart) is its cells
// as bytes, little-endian:
//
//	"GLKV", version u32, model fingerprint u64,
//	layers, kv heads, head dim, K type, V type, cells: u32 each,
//	the cells' positions: i32 each, ascending,
//	per layer: K of every cell, then V (f32, f16 or bf16 values, as the
//	types say).
//
// A quantised cache's state holds its values dequantised, as f32 (the
// header names F32), and loading requantises them: Q8_0 and Q4_0 blocks come
// back as they were, the other block types to within one level of their
// quantisation (their scales are refitted to the dequantised values).
//
// The fingerprint is the caller's (the model's identity); a state is
// loaded only into a cache of the same shape under the same fingerprint.

const (
	stateMagic   = "GLKV"
	stateVersion = 1
	headerBytes  = 4 + 4 + 8 + 6*4
)

// ErrState is wrapped by every error about a state that cannot be loaded.
var ErrState = errors.New("bad KV state")

// State returns sequence seq's cells as bytes. A pending K-shift must have
// been applied (Shift).
func (c *Cache) State(b backend.Backend, seq int, fingerprint uint64) ([]byte, error) {
	if err := c.checkSeq(seq); err != nil {
		return nil, err
	}
	if c.shifted {
		return nil, errors.New("kvcache: State with a K-shift pending: apply it first (Shift)")
	}
	var cells []int
	for j := range c.Cells {
		if c.seqs[j]&(1<<uint(seq)) != 0 {
			cells = append(cells, j)
		}
	}
	slices.SortStableFunc(cells, func(a, b int) int { return int(c.pos[a]) - int(c.pos[b]) })
	kvCols := c.KVHeads * c.HeadDim
	sk, sv := stateType(c.K), stateType(c.V)
	size := headerBytes + 4*len(cells) + len(c.k)*len(cells)*kvCols*(sk.BlockBytes()+sv.BlockBytes())
	out := make([]byte, 0, size)
	out = append(out, stateMagic...)
	out = binary.LittleEndian.AppendUint32(out, stateVersion)
	out = binary.LittleEndian.AppendUint64(out, fingerprint)
	for _, v := range []int{len(c.k), c.KVHeads, c.HeadDim, int(sk), int(sv), len(cells)} {
		out = binary.LittleEndian.AppendUint32(out, uint32(v))
	}
	for _, j := range cells {
		out = binary.LittleEndian.AppendUint32(out, uint32(c.pos[j]))
	}
	vals := make([]float32, len(cells)*kvCols)
	for il := range c.k {
		for _, pair := range []struct {
			t  backend.Tensor
			dt dtype.Type
		}{{c.k[il], sk}, {c.v[il], sv}} {
			for i := 0; i < len(cells); { // runs of consecutive cells
				e := i + 1
				for e < len(cells) && cells[e] == cells[e-1]+1 {
					e++
				}
				if err := b.ReadF32(pair.t, cells[i]*kvCols, vals[i*kvCols:e*kvCols]); err != nil {
					return nil, fmt.Errorf("kvcache: state of sequence %d: %w", seq, err)
				}
				i = e
			}
			out = appendValues(out, pair.dt, vals)
		}
	}
	return out, nil
}

// stateType is the type a cache of type t keeps its values in a state:
// its own for the float types, F32 for the quantised ones.
func stateType(t dtype.Type) dtype.Type {
	if t.Quantized() {
		return dtype.F32
	}
	return t
}

// appendValues appends v in type dt (F32, or F16 or BF16, which v holds
// exactly).
func appendValues(out []byte, dt dtype.Type, v []float32) []byte {
	for _, x := range v {
		switch dt {
		case dtype.F16:
			out = binary.LittleEndian.AppendUint16(out, dtype.F32ToF16(x))
		case dtype.BF16:
			out = binary.LittleEndian.AppendUint16(out, dtype.F32ToBF16(x))
		default:
			out = binary.LittleEndian.AppendUint32(out, math.Float32bits(x))
		}
	}
	return out
}

// stateHeader is a state's header, decoded.
type stateHeader struct {
	fingerprint                 uint64
	layers, kvHeads, headDim, n int
	k, v                        dtype.Type
	positions, kData, dataStart int
}

// LoadState replaces sequence seq's cells with those of state, which State
// made for a cache of the same shape under the same fingerprint (the cache
// types may differ: values widen exactly, or round to the cache's type). The
// cells go where the slot search puts them; rows (F32 [_, kvHeads·headDim])
// stages values on their way into a cache that is not F32. A truncated, foreign or malformed
// state is an error wrapping ErrState, and leaves the sequence as it was.
func (c *Cache) LoadState(b backend.Backend, seq int, state []byte, fingerprint uint64, rows backend.Tensor) error {
	if err := c.checkSeq(seq); err != nil {
		return err
	}
	h, err := c.parseHeader(state, fingerprint)
	if err != nil {
		return err
	}
	kvCols := c.KVHeads * c.HeadDim
	if rows.DType() != dtype.F32 || backend.Cols(rows) != kvCols {
		return fmt.Errorf("kvcache: LoadState: rows %v %v: want F32 [_, %d]", rows.DType(), rows.Shape(), kvCols)
	}
	r := c.region(seq)
	bit := uint64(1) << uint(seq)
	held := 0
	for j := r.base; j < r.base+r.size; j++ {
		if c.seqs[j] == bit {
			held++ // freed by the removal below
		}
	}
	if h.n > r.size-r.used+held {
		return fmt.Errorf("kvcache: a state of %d cells does not fit: %d of %d cells are free: %w", h.n, r.size-r.used+held, r.size, ErrFull)
	}
	if err := c.SeqRemove(seq, -1, -1); err != nil {
		return err
	}
	if h.n == 0 {
		return nil
	}
	c.segs = c.segs[:0]
	c.place(r, 0, h.n)
	cellOf := make([]int, 0, h.n)
	for _, s := range c.segs {
		for i := range s.n {
			cellOf = append(cellOf, s.cell+i)
		}
	}
	for i, j := range cellOf {
		c.pos[j] = int32(binary.LittleEndian.Uint32(state[h.positions+4*i:]))
		c.seqs[j], c.delta[j] = bit, 0
		c.touch(j)
	}
	off := h.dataStart
	vals := make([]float32, h.n*kvCols)
	for il := range c.k {
		for _, pair := range []struct {
			t        backend.Tensor
			from, to dtype.Type
		}{{c.k[il], h.k, c.K}, {c.v[il], h.v, c.V}} {
			off = readValues(vals, pair.from, state, off)
			if err := c.writeCells(b, pair.t, pair.to, cellOf, vals, rows); err != nil {
				return fmt.Errorf("kvcache: LoadState: %w", err)
			}
		}
	}
	c.segs = c.segs[:0]
	return nil
}

// parseHeader checks state's header and length against the cache.
func (c *Cache) parseHeader(state []byte, fingerprint uint64) (stateHeader, error) {
	var h stateHeader
	if len(state) < headerBytes {
		return h, fmt.Errorf("kvcache: %w: %d bytes, shorter than the %d-byte header", ErrState, len(state), headerBytes)
	}
	if string(state[:4]) != stateMagic {
		return h, fmt.Errorf("kvcache: %w: it does not start with %q", ErrState, stateMagic)
	}
	if v := binary.LittleEndian.Uint32(state[4:]); v != stateVersion {
		return h, fmt.Errorf("kvcache: %w: version %d, want %d", ErrState, v, stateVersion)
	}
	h.fingerprint = binary.LittleEndian.Uint64(state[8:])
	u := func(i int) int { return int(binary.LittleEndian.Uint32(state[16+4*i:])) }
	h.layers, h.kvHeads, h.headDim, h.k, h.v, h.n = u(0), u(1), u(2), dtype.Type(u(3)), dtype.Type(u(4)), u(5)
	if h.fingerprint != fingerprint {
		return h, fmt.Errorf("kvcache: %w: it was made by another model (fingerprint %016x, this model's %016x)", ErrState, h.fingerprint, fingerprint)
	}
	if h.layers != len(c.k) || h.kvHeads != c.KVHeads || h.headDim != c.HeadDim {
		return h, fmt.Errorf("kvcache: %w: %d layers of %d KV heads of %d, this cache has %d of %d of %d",
			ErrState, h.layers, h.kvHeads, h.headDim, len(c.k), c.KVHeads, c.HeadDim)
	}
	for _, t := range []dtype.Type{h.k, h.v} {
		if t != dtype.F16 && t != dtype.F32 && t != dtype.BF16 {
			return h, fmt.Errorf("kvcache: %w: value type %v", ErrState, t)
		}
	}
	kvCols := c.KVHeads * c.HeadDim
	want := int64(headerBytes) + 4*int64(h.n) + int64(h.layers)*int64(h.n)*int64(kvCols)*int64(h.k.BlockBytes()+h.v.BlockBytes())
	if int64(len(state)) != want {
		return h, fmt.Errorf("kvcache: %w: %d bytes for %d cells, want %d (truncated or padded)", ErrState, len(state), h.n, want)
	}
	h.positions = headerBytes
	h.dataStart = headerBytes + 4*h.n
	for i := range h.n {
		if p := int32(binary.LittleEndian.Uint32(state[h.positions+4*i:])); p < 0 {
			return h, fmt.Errorf("kvcache: %w: cell %d at position %d", ErrState, i, p)
		}
	}
	return h, nil
}

// readValues fills v from state at off, in type dt, and returns the offset
// after them.
func readValues(v []float32, dt dtype.Type, state []byte, off int) int {
	for i := range v {
		switch dt {
		case dtype.F16:
			v[i] = dtype.F16ToF32(binary.LittleEndian.Uint16(state[off:]))
			off += 2
		case dtype.BF16:
			v[i] = dtype.BF16ToF32(binary.LittleEndian.Uint16(state[off:]))
			off += 2
		default:
			v[i] = math.Float32frombits(binary.LittleEndian.Uint32(state[off:]))
			off += 4
		}
	}
	return off
}

// writeCells writes row i of vals into cell cells[i] of t (of type dt):
// directly into an F32 cache, through rows into any other (CopySlice rounds
// or quantises).
func (c *Cache) writeCells(b backend.Backend, t backend.Tensor, dt dtype.Type, cells []int, vals []float32, rows backend.Tensor) error {
	kvCols := c.KVHeads * c.HeadDim
	for i := 0; i < len(cells); {
		e := i + 1
		for e < len(cells) && cells[e] == cells[e-1]+1 {
			e++
		}
		if dt == dtype.F32 {
			if err := b.WriteF32(t, cells[i]*kvCols, vals[i*kvCols:e*kvCols]); err != nil {
				return err
			}
			i = e
			continue
		}
		n := min(e-i, backend.Rows(rows))
		if err := b.WriteF32(rows, 0, vals[i*kvCols:(i+n)*kvCols]); err != nil {
			return err
		}
		b.CopySlice(t, cells[i]*kvCols, rows, 0, n*kvCols)
		i += n
	}
	return b.Err()
}
