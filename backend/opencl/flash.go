package opencl

import (
	"github.com/glint-llm/glint/backend"
	"github.com/glint-llm/glint/dtype"
)

// faTypes are the cache types flash attention reads, by their code in
// flash.cl (FA_*).
var faTypes = map[dtype.Type]int{
	dtype.F32: 0, dtype.F16: 1, dtype.BF16: 2, dtype.Q8_0: 3, dtype.Q4_0: 4,
	dtype.Q4_1: 5, dtype.Q5_0: 6, dtype.Q5_1: 7, dtype.IQ4_NL: 8,
}

// kvqTypes are the BF16 and quantised cache types CopySlice stores, by
// their code in kvquant.cl (KVT_*).
var kvqTypes = map[dtype.Type]int{
	dtype.BF16: 0, dtype.Q8_0: 1, dtype.Q4_0: 2, dtype.Q4_1: 3, dtype.Q5_0: 4,
	dtype.Q5_1: 5, dtype.IQ4_NL: 6,
}

// copyCache is CopySlice into a BF16 or quantised cache (s F32) or out of
// one (d F32); CopySlice has checked the bounds. A quantised type moves
// whole blocks only.
func (b *Backend) copyCache(op string, d *tensor, dstOff int, s *tensor, srcOff, count int) {
	c, q := s, true
	if s.dt == dtype.F32 {
		c, q = d, false
	}
	if c.dt == dtype.BF16 {
		k := b.kvBF16
		if q {
			k = b.kvFromBF16
		}
		b.copyWith(k, d, dstOff, s, srcOff, count)
		return
	}
	bs, bb := c.dt.BlockSize(), c.dt.BlockBytes()
	off := dstOff
	if q {
		off = srcOff
	}
	if off%bs != 0 || count%bs != 0 {
		b.shape(op, "%d elements at %d of %v: a quantised cache moves whole blocks of %d", count, off, c, bs)
		return
	}
	if count == 0 {
		return
	}
	k := b.kvQuant
	if q {
		k = b.kvDequant
	}
	if !b.made(k) {
		return
	}
	n := count / bs // blocks
	if q {
		n = count / 16 // kv_dequant's groups of 16
		b.argMem(k, 0, d.mem)
		b.argU64(k, 1, dstOff)
		b.argMem(k, 2, s.mem)
		b.argU64(k, 3, srcOff/bs*bb)
	} else {
		b.argMem(k, 0, d.mem)
		b.argU64(k, 1, dstOff/bs*bb)
		b.argMem(k, 2, s.mem)
		b.argU64(k, 3, srcOff)
	}
	b.argI32(k, 4, n)
	b.argI32(k, 5, kvqTypes[c.dt])
	b.launch(k, 1, [3]int{roundUp(n, k.wg), 1, 1}, [3]int{k.wg, 1, 1}, 4*count+count/bs*bb)
}

// faTile is one flash work-group's share: hq query heads of a KV head.
// flashTile must match FA_TILE in flash.cl.
const flashTile = 64

// flashLocal is the local memory of hq queries of head size headDim (lq
// and lacc, hq·headDim floats each; ls and lf, 3·hq·FA_TILE).
func flashLocal(hq, headDim int) int64 { return int64(4 * hq * (2*headDim + 3*flashTile)) }

// attendFlash is Attention with a.Flash (flash.cl): the query converted to
// K's vec_dot_type into the activation scratch where it is not F32 or F16,
// then flash_attn over the view, split into partitions for a single long
// row as the non-flash path splits it (attnPartitions), and merged.
func (b *Backend) attendFlash(op string, ot, qt, kt, vt, rt, ct *tensor, n int, kv backend.KVView, a backend.Attn) {
	heads, kvHeads, headDim := a.Heads, a.KVHeads, a.HeadDim
	k := b.flashAttn
	if !b.made(k) {
		return
	}
	xq, xd := qt.mem, qt.mem
	if at := kt.dt.ActivationType(); kt.dt != dtype.F32 && kt.dt != dtype.F16 {
		qk := b.byType[dtype.Q8_0].quant
		switch at {
		case dtype.Q8_1:
			qk = b.byType[dtype.Q4_1].quant
		case dtype.BF16:
			qk = b.byType[dtype.BF16].round
		}
		if !b.quantize(op, qt, n, heads*headDim, at, qk) {
			return
		}
		xq, xd = b.act.q, b.act.q
		if at != dtype.BF16 {
			xd = b.act.d
		}
	}
	gq := heads / kvHeads
	hq := 0
	for h := min(gq, attnQueries); h >= 1; h-- {
		if gq%h == 0 && flashLocal(h, headDim) <= b.info.LocalMem {
			hq = h
			break
		}
	}
	if hq == 0 {
		b.shape(op, "head size %d needs %d bytes of local memory; device has %d", headDim, flashLocal(1, headDim), b.info.LocalMem)
		return
	}
	parts, partLen := 1, 0
	if p := b.attnPartitions(n, kv.Hi-kv.Lo, heads); p > 1 {
		span := kv.Hi - kv.Lo
		partLen = (span + p - 1) / p
		parts = (span + partLen - 1) / partLen
	}
	need := 4 * heads * parts * (headDim + 2)
	if parts > 1 && !b.grow(op, &b.attnScratch, &b.attnScratchBytes, need) {
		return
	}
	part := ot.mem
	if parts > 1 {
		part = b.attnScratch
	}
	unit := 1
	if headDim%16 == 0 {
		unit = 16
	}
	bf := int(b.flavour.FloatOrder(dtype.BF16, 1, headDim, 1))
	b.argMem(k, 0, ot.mem)
	b.argMem(k, 1, part)
	b.argMem(k, 2, qt.mem)
	b.argMem(k, 3, xq)
	b.argMem(k, 4, xd)
	b.argMem(k, 5, kt.mem)
	b.argMem(k, 6, vt.mem)
	b.argU64(k, 7, kt.bytes/(kt.elems/(kvHeads*headDim)))
	b.argU64(k, 8, vt.bytes/(vt.elems/(kvHeads*headDim)))
	i := b.attnView(k, 9, rt, ct, kv, a)
	b.argI32(k, i, partLen)
	b.argI32(k, i+1, heads)
	b.argI32(k, i+2, kvHeads)
	b.argI32(k, i+3, headDim)
	b.argI32(k, i+4, faTypes[kt.dt])
	b.argI32(k, i+5, faTypes[vt.dt])
	// llama.cpp folds the soft cap into the scale: s·(scale/cap), then
	// cap·tanh.
	scale := a.Scale
	if a.SoftCap > 0 {
		scale /= a.SoftCap
	}
	b.argF32(k, i+6, scale)
	b.argF32(k, i+7, a.SoftCap)
	b.argMem(k, i+8, b.status)
	b.argI32(k, i+9, b01(b.flavour.Wide()))
	b.argI32(k, i+10, bf)
	b.argI32(k, i+11, hq)
	b.argI32(k, i+12, unit)
	b.argLocal(k, i+13, 4*hq*headDim)
	b.argLocal(k, i+14, 4*hq*flashTile)
	b.argLocal(k, i+15, 8*hq*flashTile)
	b.argLocal(k, i+16, 4*hq*headDim)
	b.launch(k, 3, [3]int{k.wg * heads / hq, n, parts}, [3]int{k.wg, 1, 1},
		8*n*heads*headDim+viewBytes(n, kv, a, kt, vt))
	if parts == 1 {
		return
	}
	km := b.flashMerge
	if !b.made(km) {
		return
	}
	b.argMem(km, 0, ot.mem)
	b.argMem(km, 1, b.attnScratch)
	b.argI32(km, 2, parts)
	b.argI32(km, 3, headDim)
	L := min(km.wg, pow2Floor(headDim))
	b.launch(km, 2, [3]int{roundUp(headDim, L), heads, 1}, [3]int{L, 1, 1}, need+4*heads*headDim)
}

// hasKVQ reports whether CopySlice stores F32 rows as dt (kvquant.cl).
func hasKVQ(dt dtype.Type) bool {
	_, ok := kvqTypes[dt]
	return ok
}
