// Package kvcache is the per-layer key/value cache. Each layer's K and V live
// on the backend as [maxSeq, kvHeads, headDim] in F16 (the default, as in
// llama.cpp: half the memory, and the rounding llama.cpp's attention sees)
// or F32; new rows are appended with CopySlice, which rounds F32 rows into
// an F16 cache, so the cache never leaves the device. Attention reads the
// cache through a backend.KVView, whose row and cell tables the cache keeps
// on the backend too: a batch uploads only its own rows and new cells.
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

// Cache holds K and V for every layer, for one sequence (id 0): cell j holds
// position j. Len counts the positions filled in all layers. A batch of
// tokens at positions Len… is announced with Begin (which uploads its view),
// every layer then Stores its rows at Len and attends through View, and
// Advance moves Len on once every layer has stored.
type Cache struct {
	MaxSeq, KVHeads, HeadDim int
	// K and V are the element types of the key and value caches.
	K, V dtype.Type
	// Batch is the most tokens one Begin takes.
	Batch int

	k, v []backend.Tensor
	n    int
	// rows (I32 [Batch, 4]) and cells (I32 [MaxSeq, 3]) are the view's
	// tables (backend.KVView); rowBuf and cellBuf stage a batch's entries
	// on the host; batch is the size of the batch begun.
	rows, cells     backend.Tensor
	rowBuf, cellBuf []int32
	batch           int
}

// New allocates the cache for nLayer layers, keys of type kt and values of
// type vt (each F16 or F32), and batches of up to batch tokens.
func New(b backend.Backend, nLayer, maxSeq, batch, kvHeads, headDim int, kt, vt dtype.Type) (*Cache, error) {
	for _, t := range []dtype.Type{kt, vt} {
		if t != dtype.F16 && t != dtype.F32 {
			return nil, fmt.Errorf("kvcache: cache type %v is not supported (want F16 or F32)", t)
		}
	}
	if maxSeq < 1 || batch < 1 {
		return nil, fmt.Errorf("kvcache: %d cells for batches of %d: want at least one of each", maxSeq, batch)
	}
	c := &Cache{MaxSeq: maxSeq, KVHeads: kvHeads, HeadDim: headDim, K: kt, V: vt, Batch: batch,
		rowBuf: make([]int32, 4*batch), cellBuf: make([]int32, 3*batch)}
	var err error
	if c.rows, err = b.Alloc(dtype.I32, batch, 4); err != nil {
		return nil, fmt.Errorf("kvcache: view rows: %w", err)
	}
	if c.cells, err = b.Alloc(dtype.I32, maxSeq, 3); err != nil {
		c.Free(b)
		return nil, fmt.Errorf("kvcache: view cells: %w", err)
	}
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

// Bytes is the memory the K and V caches hold on their backend.
func (c *Cache) Bytes() int64 {
	per := int64(c.MaxSeq) * int64(c.KVHeads*c.HeadDim)
	return int64(len(c.k)) * per * int64(c.K.BlockBytes()+c.V.BlockBytes())
}

// Len is the number of positions stored.
func (c *Cache) Len() int { return c.n }

// Layer returns layer i's K and V caches, for attention.
func (c *Cache) Layer(i int) (k, v backend.Tensor) { return c.k[i], c.v[i] }

// Begin announces a batch of n tokens at positions Len()…Len()+n-1 and
// uploads its view: query row i sits at position Len()+i and sees cells
// 0…Len()+i (causal attention); cells Len()… will hold the batch's keys and
// values. Only those n rows and n cells travel to the backend.
func (c *Cache) Begin(b backend.Backend, n int) error {
	if n < 1 || n > c.Batch {
		return fmt.Errorf("kvcache: a batch of %d tokens (want 1…%d)", n, c.Batch)
	}
	if c.n+n > c.MaxSeq {
		return fmt.Errorf("kvcache: %d positions exceed the cache size %d", c.n+n, c.MaxSeq)
	}
	for i := range n {
		p := int32(c.n + i)
		r, cell := c.rowBuf[4*i:4*i+4], c.cellBuf[3*i:3*i+3]
		r[0], r[1], r[2], r[3] = p, 0, 0, p+1 // position, sequence 0, cells [0, p+1)
		cell[0], cell[1], cell[2] = p, 1, 0   // position, sequence 0's bit
	}
	if err := b.WriteI32(c.rows, 0, c.rowBuf[:4*n]); err != nil {
		return fmt.Errorf("kvcache: view rows: %w", err)
	}
	if err := b.WriteI32(c.cells, 3*c.n, c.cellBuf[:3*n]); err != nil {
		return fmt.Errorf("kvcache: view cells: %w", err)
	}
	c.batch = n
	return nil
}

// View is what the batch begun attends to (backend.KVView): every row's
// range lies in cells 0…Len()+n-1.
func (c *Cache) View() backend.KVView {
	return backend.KVView{Rows: c.rows, Cells: c.cells, Lo: 0, Hi: c.n + c.batch}
}

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
	c.batch = 0
	return nil
}

// Reset forgets every position; the buffers stay allocated.
func (c *Cache) Reset() { c.n, c.batch = 0, 0 }

// Free releases the buffers.
func (c *Cache) Free(b backend.Backend) {
	for _, t := range append(c.k, c.v...) {
		b.Free(t)
	}
	for _, t := range []backend.Tensor{c.rows, c.cells} {
		if t != nil {
			b.Free(t)
		}
	}
	c.k, c.v, c.rows, c.cells = nil, nil, nil, nil
}
