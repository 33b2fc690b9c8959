package cpu

import (
	"github.com/glint-llm/glint/backend"
	"github.com/glint-llm/glint/dtype"
)

// cacheType reports whether dt is a KV-cache type besides F32 and F16
// (dtype.CacheTypes), which CopySlice quantises into and dequantises from.
func cacheType(dt dtype.Type) bool {
	for _, t := range dtype.CacheTypes {
		if t == dt {
			return true
		}
	}
	return false
}

// cacheCopy is a copy between F32 values and a cache type's blocks.
type cacheCopy struct {
	dt     dtype.Type
	raw    []byte    // the blocks
	f      []float32 // the values
	toType bool      // quantise f into raw, else dequantise raw into f
}

// cacheBlocks is how many blocks a thread claims at a time.
const cacheBlocks = 64

// copyCache is CopySlice between F32 and a cache type (BF16 or a block
// type): F32 → type quantises whole blocks as llama.cpp's cpy stores a cache
// row (dtype.QuantizeCacheRow), type → F32 dequantises (a K-shift's read).
// It reports false, having done nothing, when the pair is not one of those
// or the range is not whole blocks.
func (b *Backend) copyCache(d *Tensor, dstOff int, s *Tensor, srcOff, count int) bool {
	q, qOff, f, fOff := d, dstOff, s, srcOff
	if s.dt != dtype.F32 {
		q, qOff, f, fOff = s, srcOff, d, dstOff
	}
	if !cacheType(q.dt) || f.dt != dtype.F32 {
		return false
	}
	bs, bb := q.dt.BlockSize(), q.dt.BlockBytes()
	if qOff%bs != 0 || count%bs != 0 {
		return false
	}
	if count == 0 {
		return true
	}
	c := &cacheCopy{dt: q.dt, raw: q.data[qOff/bs*bb : (qOff+count)/bs*bb], f: f.f32[fOff : fOff+count], toType: q == d}
	blocks := count / bs
	t := &b.pool.task
	*t = task{kind: kFunc, fn: cacheCopyBlocks, cc: c, total: blocks, grain: max(cacheBlocks, b.grainFor(blocks))}
	b.pool.run()
	return true
}

// cacheCopyBlocks converts blocks lo…hi-1 of t.cc.
func cacheCopyBlocks(_ *Backend, t *task, _, lo, hi int) {
	c := t.cc
	bs, bb := c.dt.BlockSize(), c.dt.BlockBytes()
	if c.toType {
		dtype.QuantizeCacheRow(c.dt, c.raw[lo*bb:hi*bb], c.f[lo*bs:hi*bs])
	} else {
		dtype.DequantizeRow(c.dt, c.f[lo*bs:hi*bs], c.raw[lo*bb:hi*bb])
	}
}

// readCache is ReadF32 of a BF16 or block-type cache: the blocks holding
// the range are dequantised and the range copied out.
func readCache(t *Tensor, off int, dst []float32) error {
	n := backend.Elems(t.shape)
	if off < 0 || len(dst) > n-off {
		return backend.ShapeError("cpu: ReadF32", "%d elements at offset %d outside %v tensor of %d", len(dst), off, t.shape, n)
	}
	if len(dst) == 0 {
		return nil
	}
	bs, bb := t.dt.BlockSize(), t.dt.BlockBytes()
	first, last := off/bs, (off+len(dst)+bs-1)/bs
	buf := make([]float32, (last-first)*bs)
	dtype.DequantizeRow(t.dt, buf, t.data[first*bb:last*bb])
	copy(dst, buf[off-first*bs:])
	return nil
}
