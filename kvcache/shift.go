package kvcache

import (
	"fmt"

	"github.com/glint-llm/glint/backend"
	"github.com/glint-llm/glint/dtype"
)

// Shifted reports whether some cell's keys wait to be re-rotated (Shift).
func (c *Cache) Shifted() bool { return c.shifted }

// Shift applies the K-shift that SeqShift left pending: each cell's keys,
// in layer il, are turned by RoPE ropes[il] at the cell's summed delta, as
// llama.cpp's build_k_shift does — its rope over the cache view computes
// in float32 and stores back in the cache type, here a copy into rows (F32,
// at least one row of kvHeads·headDim), RoPE at the deltas uploaded to pos
// (I32), and a copy back that rounds to the cache type. Cells without a
// delta inside a chunk turn by 0, which changes no value. Chunks are as
// long as the batch, so the workspace's K rows and positions serve. With
// no ropes (a model without RoPE, GPT-2) only the positions move, as in
// llama.cpp.
func (c *Cache) Shift(b backend.Backend, ropes []backend.Rope, rows, pos backend.Tensor) error {
	if !c.shifted {
		return nil
	}
	if ropes == nil {
		clear(c.delta)
		c.shifted = false
		return nil
	}
	if len(ropes) != len(c.k) {
		return fmt.Errorf("kvcache: K-shift: %d ropes for %d layers", len(ropes), len(c.k))
	}
	kvCols := c.KVHeads * c.HeadDim
	if rows.DType() != dtype.F32 || backend.Cols(rows) != kvCols || pos.DType() != dtype.I32 {
		return fmt.Errorf("kvcache: K-shift: rows %v %v and positions %v: want F32 [_, %d] and I32", rows.DType(), rows.Shape(), pos.DType(), kvCols)
	}
	chunk := min(c.Batch, backend.Rows(rows), backend.Elems(pos.Shape()))
	moved := func(j int) bool { return c.delta[j] != 0 && c.pos[j] >= 0 }
	for j := 0; j < c.Cells; {
		if !moved(j) {
			j++
			continue
		}
		n := min(chunk, c.Cells-j)
		for n > 1 && !moved(j+n-1) {
			n--
		}
		for i := range n {
			c.deltaBuf[i] = 0
			if moved(j + i) {
				c.deltaBuf[i] = c.delta[j+i]
			}
		}
		if err := b.WriteI32(pos, 0, c.deltaBuf[:n]); err != nil {
			return fmt.Errorf("kvcache: K-shift: %w", err)
		}
		for il := range c.k {
			b.CopySlice(rows, 0, c.k[il], j*kvCols, n*kvCols)
			b.RoPE(rows, n, c.KVHeads, c.HeadDim, pos, ropes[il])
			b.CopySlice(c.k[il], j*kvCols, rows, 0, n*kvCols)
		}
		j += n
	}
	clear(c.delta)
	c.shifted = false
	if err := b.Err(); err != nil {
		return fmt.Errorf("kvcache: K-shift: %w", err)
	}
	return nil
}
