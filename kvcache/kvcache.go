// Package kvcache is the per-layer key/value cache. Each layer's K and V live
// on the backend as F32 [maxSeq, kvHeads, headDim]; new rows are appended with
// CopySlice, so the cache never leaves the device.
package kvcache

import (
	"fmt"

	"github.com/glint-llm/glint/backend"
	"github.com/glint-llm/glint/dtype"
)

// Cache holds K and V for every layer. Len counts the positions filled in
// all layers; Store writes a layer's rows at Len, and Advance moves Len on
// once every layer has stored.
type Cache struct {
	MaxSeq, KVHeads, HeadDim int

	k, v []backend.Tensor
	n    int
}

// New allocates the cache for nLayer layers.
func New(b backend.Backend, nLayer, maxSeq, kvHeads, headDim int) (*Cache, error) {
	c := &Cache{MaxSeq: maxSeq, KVHeads: kvHeads, HeadDim: headDim}
	for i := 0; i < nLayer; i++ {
		k, err := b.Alloc(dtype.F32, maxSeq, kvHeads, headDim)
		if err != nil {
			c.Free(b)
			return nil, fmt.Errorf("kvcache: layer %d: %w", i, err)
		}
		c.k = append(c.k, k)
		v, err := b.Alloc(dtype.F32, maxSeq, kvHeads, headDim)
		if err != nil {
			c.Free(b)
			return nil, fmt.Errorf("kvcache: layer %d: %w", i, err)
		}
		c.v = append(c.v, v)
	}
	return c, nil
}

// Len is the number of positions stored.
func (c *Cache) Len() int { return c.n }

// Layer returns layer i's K and V caches, for attention.
func (c *Cache) Layer(i int) (k, v backend.Tensor) { return c.k[i], c.v[i] }

// Store appends n rows of k and v ([n, kvHeads·headDim]) to layer i at
// position Len.
func (c *Cache) Store(b backend.Backend, i int, k, v backend.Tensor, n int) {
	row := c.KVHeads * c.HeadDim
	b.CopySlice(c.k[i], c.n*row, k, 0, n*row)
	b.CopySlice(c.v[i], c.n*row, v, 0, n*row)
}

// Advance records that n more positions are stored in every layer.
func (c *Cache) Advance(n int) error {
	if c.n+n > c.MaxSeq {
		return fmt.Errorf("kvcache: %d positions exceed the cache size %d", c.n+n, c.MaxSeq)
	}
	c.n += n
	return nil
}

// Reset forgets every position; the buffers stay allocated.
func (c *Cache) Reset() { c.n = 0 }

// Free releases the buffers.
func (c *Cache) Free(b backend.Backend) {
	for _, t := range append(c.k, c.v...) {
		b.Free(t)
	}
	c.k, c.v = nil, nil
}
