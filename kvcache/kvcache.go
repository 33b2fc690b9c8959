// Package kvcache is the per-layer key/value cache of many sequences, as
// llama.cpp keeps it. Each layer's K and V live on the backend as
// [cells, kvHeads, headDim] in F16 (the default, as in llama.cpp: half the
// memory, and the rounding llama.cpp's attention sees), F32, BF16 or one of
// llama.cpp's 32-element block types (Types; those need flash attention,
// Flash). Every cell has a position and a set of sequence ids (up to 64); a
// batch's rows are stored with CopySlice, which rounds or quantises F32 rows
// into the cache's type, so the cache never leaves the device.
//
// Two layouts: Unified keeps one buffer that every sequence shares,
// masked by sequence (a prefix copied to another sequence is stored once),
// and PerStream gives each sequence its own region of cells/seqs cells.
// Attention reads the cache through a backend.KVView, whose row and cell
// tables the cache keeps on the backend too: a batch uploads only its own
// rows and the cells that changed.
//
// Moving positions (SeqShift) re-rotates the cached keys by the difference
// with RoPE, as llama.cpp's K-shift does (a quantised K dequantised, turned
// and quantised again): the deltas are kept per cell and applied, summed,
// before the next batch (Shift).
package kvcache

import (
	"errors"
	"fmt"
	"strings"

	"github.com/glint-llm/glint/backend"
	"github.com/glint-llm/glint/dtype"
)

// Types are the cache types, by the names the CLI takes (llama.cpp's
// --cache-type-k/-v names). The block types store whole 32-element blocks
// per head row, so they need a head size that is a multiple of 32; a
// quantised V needs flash attention (backend.Attn.Flash), as in llama.cpp.
var Types = map[string]dtype.Type{
	"f32": dtype.F32, "f16": dtype.F16, "bf16": dtype.BF16,
	"q8_0": dtype.Q8_0, "q4_0": dtype.Q4_0, "q4_1": dtype.Q4_1,
	"q5_0": dtype.Q5_0, "q5_1": dtype.Q5_1, "iq4_nl": dtype.IQ4_NL,
}

// TypeNames lists Types' names in a fixed order, for help and errors.
const TypeNames = "f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, iq4_nl"

// ParseType returns the cache type named s (one of TypeNames; "" is f16).
func ParseType(s string) (dtype.Type, error) {
	if s == "" {
		return dtype.F16, nil
	}
	if t, ok := Types[strings.ToLower(s)]; ok {
		return t, nil
	}
	return 0, fmt.Errorf("kvcache: cache type %q is not supported (want one of %s)", s, TypeNames)
}

// TypeName is t's name in Types (llama.cpp's spelling).
func TypeName(t dtype.Type) string {
	for name, u := range Types {
		if u == t {
			return name
		}
	}
	return t.String()
}

// Size is the bytes the K and V caches of o take (every layer), or an
// error when o's types cannot hold its rows (an unknown type, or a block
// type whose 32-element blocks do not divide the head size) or the caches
// would take more than o.MaxBytes.
func Size(o Options) (int64, error) {
	var total int64
	for _, t := range []dtype.Type{o.K, o.V} {
		known := false
		for _, u := range Types {
			known = known || u == t
		}
		if !known {
			return 0, fmt.Errorf("kvcache: cache type %v is not supported (want one of %s)", t, TypeNames)
		}
		row, err := t.RowBytes(o.HeadDim)
		if err != nil || o.HeadDim <= 0 {
			return 0, fmt.Errorf("kvcache: cache type %s stores blocks of %d values: a head size of %d is not a multiple of it",
				TypeName(t), t.BlockSize(), o.HeadDim)
		}
		total += int64(o.Layers) * int64(o.Cells) * int64(o.KVHeads) * int64(row)
	}
	if o.MaxBytes > 0 && total > o.MaxBytes {
		return 0, fmt.Errorf("kvcache: %d cells of %d layers (K %s, V %s) need %d bytes (%.2f GiB), more than the %d bytes (%.2f GiB) available: lower -c or choose a smaller cache type",
			o.Cells, o.Layers, TypeName(o.K), TypeName(o.V), total, float64(total)/(1<<30), o.MaxBytes, float64(o.MaxBytes)/(1<<30))
	}
	return total, nil
}

// Layout says where a sequence's cells may lie.
type Layout int

const (
	// Unified: one buffer of every cell; any sequence may use any cell,
	// and a cell may belong to several (a shared prefix). Each query row
	// scans the cells in use, [0, the last used cell], as llama.cpp's
	// unified cache does, so a single sequence gets llama.cpp's view.
	Unified Layout = iota
	// PerStream: sequence s owns the region [s·n, (s+1)·n) of n = cells/seqs
	// cells, and its rows scan only that region, so a sequence computes
	// the same bits alone as beside others.
	PerStream
)

// Layouts are the layouts by name.
var Layouts = map[string]Layout{"unified": Unified, "per-stream": PerStream}

func (l Layout) String() string {
	if l == PerStream {
		return "per-stream"
	}
	return "unified"
}

// MaxSeqs is the most sequences a cache holds: a cell's sequence set is a
// 64-bit mask (backend.KVView).
const MaxSeqs = 64

// ErrFull is wrapped when a batch finds no room in the cache.
var ErrFull = errors.New("the KV cache is full")

// Options size a cache.
type Options struct {
	Layers, KVHeads, HeadDim int
	// Cells is the number of cells in all (llama.cpp's n_ctx).
	Cells int
	// Batch is the most tokens one Begin takes.
	Batch int
	// K and V are the element types of the key and value caches (Types).
	K, V dtype.Type
	// MaxBytes, when > 0, is the memory the caches may take: a larger
	// cache is an error naming both figures, before anything is allocated.
	MaxBytes int64
	// Seqs is the number of sequence ids, 0…Seqs-1 (≤ 0: 1).
	Seqs   int
	Layout Layout
}

// Cache holds K and V for every layer and the cells' positions and
// sequences. A batch is announced with Begin (which finds its cells and
// uploads its view), every layer then Stores its rows and attends through
// View. It is not safe for concurrent use.
type Cache struct {
	Options

	k, v []backend.Tensor
	// rows (I32 [Batch, 4]) and cells (I32 [Cells, 3]) are the view's
	// tables (backend.KVView). rowBuf stages a batch's rows; cellBuf
	// mirrors the cell table, of which [dirtyLo, dirtyHi) has changed
	// since it was last uploaded.
	rows, cells       backend.Tensor
	rowBuf, cellBuf   []int32
	dirtyLo, dirtyHi  int
	pos               []int32  // per cell; -1: empty
	seqs              []uint64 // per cell
	delta             []int32  // per cell: the K-shift not yet applied
	shifted           bool     // some delta is not zero
	regions           []region
	segs              []segment // the batch begun: where its rows went
	viewLo, viewHi, n int
	// deltaBuf stages a K-shift's positions; need counts a batch's
	// cells per region.
	deltaBuf []int32
	need     []int
}

// region is a run of cells that a slot search stays in: the whole cache
// (Unified) or one sequence's stream. head is where the next search
// starts and used counts the cells in use, as llama.cpp keeps them.
type region struct{ base, size, head, used int }

// segment is a run of a batch's rows stored in consecutive cells.
type segment struct{ row, cell, n int }

// New allocates the cache on b.
func New(b backend.Backend, o Options) (*Cache, error) {
	if _, err := Size(o); err != nil {
		return nil, err
	}
	if o.Seqs <= 0 {
		o.Seqs = 1
	}
	if o.Seqs > MaxSeqs {
		return nil, fmt.Errorf("kvcache: %d sequences: at most %d", o.Seqs, MaxSeqs)
	}
	if o.Layout != Unified && o.Layout != PerStream {
		return nil, fmt.Errorf("kvcache: unknown layout %d", o.Layout)
	}
	if o.Cells < 1 || o.Batch < 1 || o.Layout == PerStream && o.Cells < o.Seqs {
		return nil, fmt.Errorf("kvcache: %d cells for batches of %d and %d %v sequences: want at least one cell per stream and a batch of one", o.Cells, o.Batch, o.Seqs, o.Layout)
	}
	if o.Layout == PerStream {
		o.Cells = o.Cells / o.Seqs * o.Seqs // whole streams
	}
	c := &Cache{Options: o, rowBuf: make([]int32, 4*o.Batch), cellBuf: make([]int32, 3*o.Cells),
		pos: make([]int32, o.Cells), seqs: make([]uint64, o.Cells), delta: make([]int32, o.Cells),
		segs: make([]segment, 0, o.Batch), deltaBuf: make([]int32, o.Batch)}
	if o.Layout == PerStream {
		n := o.Cells / o.Seqs
		for s := range o.Seqs {
			c.regions = append(c.regions, region{base: s * n, size: n})
		}
	} else {
		c.regions = []region{{size: o.Cells}}
	}
	c.need = make([]int, len(c.regions))
	for j := range c.pos {
		c.pos[j] = -1
		c.touch(j)
	}
	var err error
	if c.rows, err = b.Alloc(dtype.I32, o.Batch, 4); err != nil {
		return nil, fmt.Errorf("kvcache: view rows: %w", err)
	}
	if c.cells, err = b.Alloc(dtype.I32, o.Cells, 3); err != nil {
		c.Free(b)
		return nil, fmt.Errorf("kvcache: view cells: %w", err)
	}
	for i := 0; i < o.Layers; i++ {
		k, err := b.Alloc(o.K, o.Cells, o.KVHeads, o.HeadDim)
		if err != nil {
			c.Free(b)
			return nil, fmt.Errorf("kvcache: layer %d: %w", i, err)
		}
		c.k = append(c.k, k)
		v, err := b.Alloc(o.V, o.Cells, o.KVHeads, o.HeadDim)
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
	o := c.Options
	o.MaxBytes = 0
	n, _ := Size(o)
	return n
}

// Context is the most cells one sequence can hold: every cell in a unified
// cache, its stream's in a per-stream one (llama.cpp's n_ctx_seq).
func (c *Cache) Context() int { return c.regions[0].size }

// Layer returns layer i's K and V caches, for attention.
func (c *Cache) Layer(i int) (k, v backend.Tensor) { return c.k[i], c.v[i] }

// region returns the region sequence seq's cells lie in.
func (c *Cache) region(seq int) *region {
	if c.Layout == PerStream {
		return &c.regions[seq]
	}
	return &c.regions[0]
}

// checkSeq refuses a sequence id the cache does not have.
func (c *Cache) checkSeq(seq int) error {
	if seq < 0 || seq >= c.Seqs {
		return fmt.Errorf("kvcache: sequence %d outside 0…%d", seq, c.Seqs-1)
	}
	return nil
}

// touch records that cell j's table entry changed.
func (c *Cache) touch(j int) {
	e := c.cellBuf[3*j : 3*j+3]
	e[0], e[1], e[2] = c.pos[j], int32(uint32(c.seqs[j])), int32(uint32(c.seqs[j]>>32))
	if c.dirtyLo >= c.dirtyHi {
		c.dirtyLo, c.dirtyHi = j, j+1
		return
	}
	c.dirtyLo, c.dirtyHi = min(c.dirtyLo, j), max(c.dirtyHi, j+1)
}

// free empties cell j, which region r holds, and reports it.
func (c *Cache) free(r *region, j int) {
	if c.pos[j] >= 0 {
		r.used--
	}
	c.pos[j], c.seqs[j], c.delta[j] = -1, 0, 0
	c.touch(j)
}

// Begin announces a batch of n = len(pos) tokens, token i at position
// pos[i] of sequence seq[i], finds their cells and uploads the view: row i
// sees the cells of its sequence at positions ≤ pos[i]. A unified cache
// puts the batch in n consecutive free cells found as llama.cpp's slot
// search does (from a moving head), so that Store is one copy; where the
// free cells are scattered, the batch is stored in as many runs. A
// per-stream cache does the same in each sequence's stream. Only the rows
// and the changed cells travel to the backend.
func (c *Cache) Begin(b backend.Backend, pos, seq []int32) error {
	n := len(pos)
	if n < 1 || n > c.Batch || len(seq) != n {
		return fmt.Errorf("kvcache: a batch of %d tokens (%d sequence ids; want 1…%d)", n, len(seq), c.Batch)
	}
	for i, p := range pos {
		if p < 0 {
			return fmt.Errorf("kvcache: token %d: position %d < 0", i, p)
		}
	}
	if err := c.Room(seq); err != nil {
		return err
	}
	c.segs = c.segs[:0]
	if c.Layout == Unified {
		c.place(&c.regions[0], 0, n)
	} else {
		// Each run of consecutive tokens of one sequence goes to its stream.
		for i := 0; i < n; {
			j := i + 1
			for j < n && seq[j] == seq[i] {
				j++
			}
			c.place(&c.regions[seq[i]], i, j-i)
			i = j
		}
	}
	for _, s := range c.segs {
		for i := range s.n {
			j := s.cell + i
			c.pos[j], c.seqs[j], c.delta[j] = pos[s.row+i], 1<<uint(seq[s.row+i]), 0
			c.touch(j)
		}
	}
	// Every row of a region scans the same range: its cells up to the last
	// in use (llama.cpp's [0, cell_max) in a unified cache).
	c.viewLo, c.viewHi = c.Cells, 0
	for i := range n {
		r := c.region(int(seq[i]))
		hi := c.lastUsed(r)
		row := c.rowBuf[4*i : 4*i+4]
		row[0], row[1], row[2], row[3] = pos[i], seq[i], int32(r.base), int32(hi)
		c.viewLo, c.viewHi = min(c.viewLo, r.base), max(c.viewHi, hi)
	}
	c.n = n
	if err := b.WriteI32(c.rows, 0, c.rowBuf[:4*n]); err != nil {
		return fmt.Errorf("kvcache: view rows: %w", err)
	}
	return c.upload(b)
}

// upload sends the changed cell entries to the backend.
func (c *Cache) upload(b backend.Backend) error {
	if c.dirtyLo >= c.dirtyHi {
		return nil
	}
	if err := b.WriteI32(c.cells, 3*c.dirtyLo, c.cellBuf[3*c.dirtyLo:3*c.dirtyHi]); err != nil {
		return fmt.Errorf("kvcache: view cells: %w", err)
	}
	c.dirtyLo, c.dirtyHi = 0, 0
	return nil
}

func (c *Cache) regionIndex(seq int) int {
	if c.Layout == PerStream {
		return seq
	}
	return 0
}

// lastUsed is one past the last cell in use in r (r.base when none is).
func (c *Cache) lastUsed(r *region) int {
	for j := r.base + r.size; j > r.base; j-- {
		if c.pos[j-1] >= 0 {
			return j
		}
	}
	return r.base
}

// place finds cells in r for the n rows from row and appends their
// segments; the caller made sure that r has n free cells. It is
// llama.cpp's llama_kv_cache_find_slot: the search starts at the head (at
// the region's start if the head has run far past the cells in use),
// wraps around, and wants n consecutive free cells; the head then moves
// past them, as llama_decode moves it after the batch. Scattered free
// cells, which llama.cpp would refuse, are taken in order.
func (c *Cache) place(r *region, row, n int) {
	if r.head > r.used+2*n {
		r.head = 0
	}
	tested := 0
	for tested < r.size && n <= r.size {
		if r.head+n > r.size {
			tested += r.size - r.head
			r.head = 0
			continue
		}
		found := true
		for i := range n {
			if c.pos[r.base+r.head+i] >= 0 {
				found = false
				r.head += i + 1
				tested += i + 1
				break
			}
		}
		if found {
			c.segs = append(c.segs, segment{row: row, cell: r.base + r.head, n: n})
			for i := range n {
				c.pos[r.base+r.head+i] = 0 // taken; Begin sets its position
			}
			r.used += n
			r.head += n
			if r.head >= r.size {
				r.head = 0
			}
			return
		}
	}
	left := n
	for j := r.base; j < r.base+r.size && left > 0; j++ {
		if c.pos[j] >= 0 {
			continue
		}
		if k := len(c.segs) - 1; k >= 0 && c.segs[k].cell+c.segs[k].n == j && c.segs[k].row+c.segs[k].n == row+n-left {
			c.segs[k].n++
		} else {
			c.segs = append(c.segs, segment{row: row + n - left, cell: j, n: 1})
		}
		c.pos[j] = 0 // taken; Begin sets its position
		left--
		r.head = j + 1 - r.base
	}
	r.used += n
	if r.head >= r.size {
		r.head = 0
	}
}

// View is what the batch begun attends to (backend.KVView).
func (c *Cache) View() backend.KVView {
	return backend.KVView{Rows: c.rows, Cells: c.cells, Lo: c.viewLo, Hi: c.viewHi}
}

// Store writes the n rows of k and v ([n, kvHeads·headDim], F32) of the
// batch begun into layer i's cells, rounding them to the cache types: one
// copy per run of consecutive cells (one in all, usually).
func (c *Cache) Store(b backend.Backend, i int, k, v backend.Tensor, n int) {
	row := c.KVHeads * c.HeadDim
	for _, s := range c.segs {
		if s.row >= n {
			break
		}
		m := min(s.n, n-s.row)
		b.CopySlice(c.k[i], s.cell*row, k, s.row*row, m*row)
		b.CopySlice(c.v[i], s.cell*row, v, s.row*row, m*row)
	}
}

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

// Room reports whether a batch of tokens of the sequences seq fits in the
// free cells (ErrFull if not), so that a batch split in several Begins is
// refused before any of it is stored.
func (c *Cache) Room(seq []int32) error {
	need := c.need
	clear(need)
	for i, s := range seq {
		if err := c.checkSeq(int(s)); err != nil {
			return fmt.Errorf("kvcache: token %d: %w", i, err)
		}
		need[c.regionIndex(int(s))]++
	}
	for ri, k := range need {
		if r := &c.regions[ri]; k > r.size-r.used {
			what := "the cache"
			if c.Layout == PerStream {
				what = fmt.Sprintf("sequence %d's stream", ri)
			}
			return fmt.Errorf("kvcache: %d tokens for %s, which has %d of %d cells free: %w", k, what, r.size-r.used, r.size, ErrFull)
		}
	}
	return nil
}

// FlashModes are -fa's values (llama.cpp's --flash-attn spelling).
const FlashModes = "on, off, auto"

// Flash decides whether attention over caches of types k and v runs as
// flash attention (backend.Attn.Flash), for the mode -fa names: "on",
// "off", or "auto" ("" too), which is on exactly when a cache is neither
// F32 nor F16 (the mul_mat graph takes only those) and off otherwise, so
// that the default keeps the mul_mat graph's bits. A cache type that needs
// flash attention with "off" is an error, as in llama.cpp ("V cache
// quantization requires flash_attn").
func Flash(mode string, k, v dtype.Type) (bool, error) {
	needs := func(t dtype.Type) bool { return t != dtype.F32 && t != dtype.F16 }
	switch strings.ToLower(mode) {
	case "on", "1", "true":
		return true, nil
	case "", "auto":
		return needs(k) || needs(v), nil
	case "off", "0", "false":
		for _, c := range []struct {
			name string
			t    dtype.Type
		}{{"V", v}, {"K", k}} {
			if needs(c.t) {
				return false, fmt.Errorf("kvcache: a %s cache of type %s requires flash attention (-fa on or auto)", c.name, TypeName(c.t))
			}
		}
		return false, nil
	}
	return false, fmt.Errorf("kvcache: flash attention %q: want one of %s", mode, FlashModes)
}
