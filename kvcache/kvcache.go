// Package kvcache is the per-layer key/value cache. Each layer's K and V live
// on the backend as [maxSeq, kvHeads, headDim] in F16 (the default, as in
// llama.cpp: half the memory, and the rounding llama.cpp's attention sees)
// or F32; new rows are appended with CopySlice, which rounds F32 rows into
// an F16 cache, so the cache never leaves the device.
package kvcache

import (
	"fmt"
	"strings"

	"github.com/glint-llm/glint/backend"
	"github.com/glint-llm/glint/dtype"
)

// Types are the cache types, by the names the CLI takes (llama.cpp's
// --cache-type-k/-v names).
var Types = map[string]dtype.Type{"f16": dtype.F16, "f32": dtype.F32}

// ParseType returns the cache type named s ("f16" or "f32"; "" is f16).
func ParseType(s string) (dtype.Type, error) {
	if s == "" {
		return dtype.F16, nil
	}
	if t, ok := Types[strings.ToLower(s)]; ok {
		return t, nil
	}
	return 0, fmt.Errorf("kvcache: cache type %q is not supported (want f16 or f32)", s)
}

// Cache holds K and V for every layer. Len counts the positions filled in
// all layers; Store writes a layer's rows at Len, and Advance moves Len on
// once every layer has stored.
type Cache struct {
	MaxSeq, KVHeads, HeadDim int
	// K and V are the element types of the key and value caches.
	K, V dtype.Type

	k, v []backend.Tensor
	n    int
}

// New allocates the cache for nLayer layers, keys of type kt and values of
// type vt (each F16 or F32).
func New(b backend.Backend, nLayer, maxSeq, kvHeads, headDim int, kt, vt dtype.Type) (*Cache, error) {
	for _, t := range []dtype.Type{kt, vt} {
		if t != dtype.F16 && t != dtype.F32 {
			return nil, fmt.Errorf("kvcache: cache type %v is not supported (want F16 or F32)", t)
		}
	}
	c := &Cache{MaxSeq: maxSeq, KVHeads: kvHeads, HeadDim: headDim, K: kt, V: vt}
	for i := 0; i < nLayer; i++ {
		k, err := b.Alloc(kt, maxSeq, kvHeads, headDim)
		if err != nil {
			c.Free(b)
			return nil, fmt.Errorf("kvcache: layer %d: %w", i, err)
		}
		c.k = append(c.k, k)
		v, err := b.Alloc(vt, maxSeq, kvHeads, headDim)
		if err != nil {
			c.Free(b)
			return nil, fmt.Errorf("kvcache: layer %d: %w", i, err)
		}
		c.v = append(c.v, v)
	}
	return c, nil
}

// Bytes is the memory the cache holds on its backend.
func (c *Cache) Bytes() int64 {
	per := int64(c.MaxSeq) * int64(c.KVHeads*c.HeadDim)
	return int64(len(c.k)) * per * int64(c.K.BlockBytes()+c.V.BlockBytes())
}

// Len is the number of positions stored.
func (c *Cache) Len() int { return c.n }

// Layer returns layer i's K and V caches, for attention.
func (c *Cache) Layer(i int) (k, v backend.Tensor) { return c.k[i], c.v[i] }

// Store appends n rows of k and v ([n, kvHeads·headDim], F32) to layer i at
// position Len, rounding them to the cache types.
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
