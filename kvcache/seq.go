package kvcache

import (
	"fmt"
	"math"

	"github.com/glint-llm/glint/backend"
)

// The sequence operations are llama.cpp's llama_kv_cache_seq_*: a range
// [p0, p1) of positions with p0 < 0 meaning 0 and p1 < 0 meaning no end.

func posRange(p0, p1 int) (int32, int32) {
	lo, hi := int32(max(p0, 0)), int32(math.MaxInt32)
	if p1 >= 0 {
		hi = int32(min(p1, math.MaxInt32))
	}
	return lo, hi
}

// regionsOf returns the regions holding sequence seq's cells (every region
// for seq < 0).
func (c *Cache) regionsOf(seq int) []region {
	if seq < 0 || c.Layout == Unified {
		return c.regions
	}
	return c.regions[seq : seq+1]
}

// SeqRemove removes the positions [p0, p1) of sequence seq (of every
// sequence if seq < 0); a cell no sequence holds any more is free, and the
// slot search starts again at the first cell freed if that is before its
// head.
func (c *Cache) SeqRemove(seq, p0, p1 int) error {
	if seq >= 0 {
		if err := c.checkSeq(seq); err != nil {
			return err
		}
	}
	lo, hi := posRange(p0, p1)
	rs := c.regionsOf(seq)
	for ri := range rs {
		r := &rs[ri]
		newHead := -1
		for j := r.base; j < r.base+r.size; j++ {
			if c.pos[j] < lo || c.pos[j] >= hi {
				continue
			}
			if seq >= 0 {
				if c.seqs[j]&(1<<uint(seq)) == 0 {
					continue
				}
				c.seqs[j] &^= 1 << uint(seq)
				c.touch(j)
			}
			if seq < 0 || c.seqs[j] == 0 {
				c.free(r, j)
				if newHead < 0 {
					newHead = j - r.base
				}
			}
		}
		if newHead >= 0 && newHead < r.head {
			r.head = newHead
		}
	}
	return nil
}

// SeqCopy makes sequence dst hold src's positions [p0, p1) too. A unified
// cache stores them once: their cells gain dst's bit. A per-stream cache
// copies the cells' keys and values into the same places of dst's stream,
// which must be free there.
func (c *Cache) SeqCopy(b backend.Backend, src, dst, p0, p1 int) error {
	for _, s := range []int{src, dst} {
		if err := c.checkSeq(s); err != nil {
			return err
		}
	}
	if src == dst {
		return nil
	}
	lo, hi := posRange(p0, p1)
	in := func(j int) bool { return c.seqs[j]&(1<<uint(src)) != 0 && c.pos[j] >= lo && c.pos[j] < hi }
	if c.Layout == Unified {
		c.regions[0].head = 0 // as llama.cpp
		for j := range c.Cells {
			if in(j) && c.seqs[j]&(1<<uint(dst)) == 0 {
				c.seqs[j] |= 1 << uint(dst)
				c.touch(j)
			}
		}
		return nil
	}
	rs, rd := &c.regions[src], &c.regions[dst]
	for j := rs.base; j < rs.base+rs.size; j++ {
		if in(j) && c.pos[j-rs.base+rd.base] >= 0 {
			return fmt.Errorf("kvcache: copying sequence %d into %d: cell %d of its stream is in use (remove its positions first)", src, dst, j-rs.base)
		}
	}
	row := c.KVHeads * c.HeadDim
	for j := rs.base; j < rs.base+rs.size; {
		if !in(j) {
			j++
			continue
		}
		e := j + 1
		for e < rs.base+rs.size && in(e) {
			e++
		}
		d := j - rs.base + rd.base
		for il := range c.k {
			b.CopySlice(c.k[il], d*row, c.k[il], j*row, (e-j)*row)
			b.CopySlice(c.v[il], d*row, c.v[il], j*row, (e-j)*row)
		}
		for i := range e - j {
			c.pos[d+i], c.seqs[d+i], c.delta[d+i] = c.pos[j+i], 1<<uint(dst), c.delta[j+i]
			c.touch(d + i)
		}
		rd.used += e - j
		j = e
	}
	return nil
}

// SeqKeep removes every sequence but seq.
func (c *Cache) SeqKeep(seq int) error {
	if err := c.checkSeq(seq); err != nil {
		return err
	}
	for ri := range c.regions {
		r := &c.regions[ri]
		newHead := -1
		for j := r.base; j < r.base+r.size; j++ {
			switch {
			case c.seqs[j]&(1<<uint(seq)) == 0:
				if c.pos[j] >= 0 || c.seqs[j] != 0 {
					c.free(r, j)
					if newHead < 0 {
						newHead = j - r.base
					}
				}
			case c.seqs[j] != 1<<uint(seq):
				c.seqs[j] = 1 << uint(seq)
				c.touch(j)
			}
		}
		if newHead >= 0 && newHead < r.head {
			r.head = newHead
		}
	}
	return nil
}

// SeqShift adds delta to the positions [p0, p1) of sequence seq
// (llama.cpp's llama_kv_cache_seq_add). A cell whose position falls below
// 0 is freed. The cached keys are re-rotated by delta before the next
// batch (Shift), as llama.cpp's K-shift does. A cell that other sequences
// share keeps its position for them: seq's keys move to a copy (in free
// cells) first; llama.cpp would move them for every sequence.
func (c *Cache) SeqShift(b backend.Backend, seq, p0, p1, delta int) error {
	if err := c.checkSeq(seq); err != nil {
		return err
	}
	lo, hi := posRange(p0, p1)
	if lo >= hi || delta == 0 {
		return nil
	}
	bit := uint64(1) << uint(seq)
	r := c.region(seq)
	if err := c.unshare(b, r, bit, lo, hi); err != nil {
		return err
	}
	newHead := -1
	for j := r.base; j < r.base+r.size; j++ {
		if c.seqs[j]&bit == 0 || c.pos[j] < lo || c.pos[j] >= hi {
			continue
		}
		p := int64(c.pos[j]) + int64(delta)
		if p < 0 {
			c.free(r, j)
			if newHead < 0 {
				newHead = j - r.base
			}
			continue
		}
		c.pos[j] = int32(min(p, math.MaxInt32))
		c.delta[j] += int32(delta)
		c.shifted = true
		c.touch(j)
	}
	if newHead >= 0 {
		r.head = newHead
	} else {
		r.head = 0 // as llama.cpp: the next search starts from the beginning
	}
	return nil
}

// unshare gives sequence bit its own copy of each cell in r at a position
// in [lo, hi) that other sequences share too, so that moving its positions
// leaves theirs alone.
func (c *Cache) unshare(b backend.Backend, r *region, bit uint64, lo, hi int32) error {
	shared := 0
	for j := r.base; j < r.base+r.size; j++ {
		if c.seqs[j]&bit != 0 && c.seqs[j] != bit && c.pos[j] >= lo && c.pos[j] < hi {
			shared++
		}
	}
	if shared == 0 {
		return nil
	}
	if r.size-r.used < shared {
		return fmt.Errorf("kvcache: moving positions that other sequences share needs %d free cells for a copy, %d are: %w", shared, r.size-r.used, ErrFull)
	}
	row := c.KVHeads * c.HeadDim
	free := r.base
	for j := r.base; j < r.base+r.size; j++ {
		if c.seqs[j]&bit == 0 || c.seqs[j] == bit || c.pos[j] < lo || c.pos[j] >= hi {
			continue
		}
		for c.pos[free] >= 0 || c.seqs[free] != 0 {
			free++
		}
		for il := range c.k {
			b.CopySlice(c.k[il], free*row, c.k[il], j*row, row)
			b.CopySlice(c.v[il], free*row, c.v[il], j*row, row)
		}
		c.pos[free], c.seqs[free], c.delta[free] = c.pos[j], bit, c.delta[j]
		c.seqs[j] &^= bit
		r.used++
		c.touch(free)
		c.touch(j)
	}
	return nil
}

// SeqPosMax is the largest position of sequence seq, -1 when it has none.
func (c *Cache) SeqPosMax(seq int) int {
	p := -1
	if c.checkSeq(seq) != nil {
		return p
	}
	r := c.region(seq)
	for j := r.base; j < r.base+r.size; j++ {
		if c.seqs[j]&(1<<uint(seq)) != 0 {
			p = max(p, int(c.pos[j]))
		}
	}
	return p
}

// Cell returns cell j's position (-1: empty) and sequence set, for tests
// and diagnostics.
func (c *Cache) Cell(j int) (pos int32, seqs uint64) { return c.pos[j], c.seqs[j] }
