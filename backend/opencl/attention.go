package opencl

import (
	"fmt"

	"github.com/glint-llm/glint/backend"
	"github.com/glint-llm/glint/dtype"
)

// attnLanes is how many V lanes per output a launch's exact arithmetic
// takes at most (att_mode_of in attention.cl): vec_dot's four vectors of
// the build's width, 16 on AVX-512 (wide) else 8. A prefill row that
// llama.cpp's sgemm takes uses one vector of them.
func attnLanes(wide bool) int {
	if wide {
		return 4 * 16
	}
	return 4 * 8
}

// attnQueries must match ATT_Q in attention.cl: the most queries (query
// heads of one KV head times query rows) an attention work-group takes.
const attnQueries = 8

// attnTile is how attention_K_V tiles its queries and the V lanes lacc
// keeps for each.
type attnTile struct {
	hq, rows, lanes int
}

// attnLocal returns, for gq query heads per KV head and n query rows, the
// tile with the most queries for which the device has the attention
// kernels' local memory (see attention.cl) with want V lanes per output:
// the most heads of a KV head (a divisor of gq), then the most rows, so
// that they share each key's and value's load. When not even one query
// fits, one with the most lanes that fit, a power of two, fewer than want
// summed plainly, off the CPU's bits. It reports and returns a zero tile
// when not even one lane fits.
func (b *Backend) attnLocal(op string, k *kern, headDim, want, gq, n int) attnTile {
	if !b.made(k) {
		return attnTile{}
	}
	L := k.wg
	fits := func(q, g int) bool {
		return q <= L && int64(4*q*(headDim+attChunk+g*headDim+L)) <= b.info.LocalMem
	}
	for hq := min(gq, attnQueries); hq >= 1; hq-- {
		if gq%hq != 0 {
			continue
		}
		for r := min(n, attnQueries/hq); r >= 1; r-- {
			if fits(hq*r, want) {
				return attnTile{hq, r, want}
			}
		}
	}
	for g := want / 2; g >= 1; g /= 2 {
		if fits(1, g) {
			return attnTile{1, 1, g}
		}
	}
	b.shape(op, "head size %d needs %d bytes of local memory; device has %d", headDim, 4*(2*headDim+attChunk+L), b.info.LocalMem)
	return attnTile{}
}

// setAttnLocal sets the four local arrays lq, ls, lacc and red of t's
// queries from argument i.
func (b *Backend) setAttnLocal(k *kern, i, headDim int, t attnTile) {
	q, L := t.hq*t.rows, k.wg
	b.argLocal(k, i, 4*q*headDim)
	b.argLocal(k, i+1, 4*q*attChunk)
	b.argLocal(k, i+2, 4*q*t.lanes*headDim)
	b.argLocal(k, i+3, 4*q*L)
}

// attnPartitions is how many work-groups per head a decode step over a
// view of span cells uses. One (the single-pass kernel) unless the heads
// alone leave the device short of work-groups — about four per compute
// unit keeps each busy — and the view is long enough that a partition
// still spans a whole chunk. Prefill rows (n > 1) already give heads·n
// groups.
func (b *Backend) attnPartitions(n, span, heads int) int {
	if n != 1 || span < 1 {
		return 1
	}
	most := (span + attChunk - 1) / attChunk
	if b.attnParts > 0 {
		return min(b.attnParts, span)
	}
	want := (4*b.info.ComputeUnits + heads - 1) / heads
	return max(1, min(want, most))
}

// kvIndex is a cache's index into the attention kernel tables: 0 for F32,
// 1 for F16 (Attention has checked that it is one of the two).
func kvIndex(c *tensor) int {
	if c.dt == dtype.F16 {
		return 1
	}
	return 0
}

// attnView sets the view arguments every attention kernel takes from
// argument i (rows, cells, Lo, Hi, window) and returns the next index.
func (b *Backend) attnView(k *kern, i int, rt, ct *tensor, kv backend.KVView, a backend.Attn) int {
	b.argMem(k, i, rt.mem)
	b.argMem(k, i+1, ct.mem)
	b.argI32(k, i+2, kv.Lo)
	b.argI32(k, i+3, kv.Hi)
	b.argI32(k, i+4, a.Window)
	return i + 5
}

// attnScoring sets scale, cap and 1/cap (rounded on the host, as llama.cpp
// computes it once) from argument i and returns the next index.
func (b *Backend) attnScoring(k *kern, i int, a backend.Attn) int {
	var capInv float32
	if a.SoftCap > 0 {
		capInv = 1 / a.SoftCap
	}
	b.argF32(k, i, a.Scale)
	b.argF32(k, i+1, a.SoftCap)
	b.argF32(k, i+2, capInv)
	return i + 3
}

// attnPartArgs sets the arguments the split's kernels share from argument
// i (the view, partLen, the geometry, the scoring and the status word) and
// returns the next index.
func (b *Backend) attnPartArgs(k *kern, i int, rt, ct *tensor, kv backend.KVView, a backend.Attn, partLen int) int {
	i = b.attnView(k, i, rt, ct, kv, a)
	b.argI32(k, i, partLen)
	b.argI32(k, i+1, a.Heads)
	b.argI32(k, i+2, a.KVHeads)
	b.argI32(k, i+3, a.HeadDim)
	i = b.attnScoring(k, i+4, a)
	b.argMem(k, i, b.status)
	return i + 1
}

// attendSplit is flash-decoding (attention_stats, attention_part, then
// attention_merge) of one query over the view [kv.Lo, kv.Hi) in parts
// partitions, the query heads of a KV head together (attnLocal). The
// statistics pass is what lets every partition round its probabilities
// with the global maximum and sum, as the single pass does.
func (b *Backend) attendSplit(op string, ot, qt, kt, vt, rt, ct *tensor, kv backend.KVView, a backend.Attn, parts int, wide bool) {
	heads, headDim := a.Heads, a.HeadDim
	kp := b.attentionPart[kvIndex(kt)][kvIndex(vt)]
	t := b.attnLocal(op, kp, headDim, attnLanes(wide), heads/a.KVHeads, 1)
	if t.lanes == 0 {
		return
	}
	span := kv.Hi - kv.Lo
	partLen := (span + parts - 1) / parts
	parts = (span + partLen - 1) / partLen // every partition non-empty
	need := 4 * heads * parts * (headDim + 2)
	if need > b.attnScratchBytes {
		b.attnScratch.Release()
		b.attnScratchBytes = 0
		m, err := b.ctx.NewBuffer(need)
		if err != nil {
			b.fail(fmt.Errorf("opencl: %s: flash-decoding scratch of %s: %w", op, size(int64(need)), err))
			return
		}
		b.attnScratch, b.attnScratchBytes = m, need
	}

	ks, km := b.attentionStats[kvIndex(kt)], b.attentionMerge
	if !b.made(ks) || !b.made(km) {
		return
	}
	b.argMem(ks, 0, b.attnScratch)
	b.argMem(ks, 1, qt.mem)
	b.argMem(ks, 2, kt.mem)
	i := b.attnPartArgs(ks, 3, rt, ct, kv, a, partLen)
	b.argI32(ks, i, b01(wide))
	b.argI32(ks, i+1, t.hq)
	b.argLocal(ks, i+2, 4*t.hq*headDim)
	b.argLocal(ks, i+3, 4*t.hq*ks.wg)
	groups := heads / t.hq
	b.launch(ks, 2, [3]int{ks.wg * groups, parts, 1}, [3]int{ks.wg, 1, 1}, 4*heads*headDim+viewBytes(1, kv, a, kt)+8*heads*parts)

	b.argMem(kp, 0, b.attnScratch)
	b.argMem(kp, 1, qt.mem)
	b.argMem(kp, 2, kt.mem)
	b.argMem(kp, 3, vt.mem)
	i = b.attnPartArgs(kp, 4, rt, ct, kv, a, partLen)
	b.argI32(kp, i, b01(wide))
	b.argI32(kp, i+1, t.lanes)
	b.argI32(kp, i+2, t.hq)
	b.setAttnLocal(kp, i+3, headDim, t)
	b.launch(kp, 2, [3]int{kp.wg * groups, parts, 1}, [3]int{kp.wg, 1, 1}, 4*heads*headDim+viewBytes(1, kv, a, kt, vt)+need)

	b.argMem(km, 0, ot.mem)
	b.argMem(km, 1, b.attnScratch)
	b.argI32(km, 2, parts)
	b.argI32(km, 3, headDim)
	L := min(km.wg, pow2Floor(headDim))
	b.launch(km, 2, [3]int{roundUp(headDim, L), heads, 1}, [3]int{L, 1, 1}, need-8*heads*parts+4*heads*headDim)
}

// viewBytes is what an attention kernel over n query rows reads of the
// caches and of the view's tables (Stats.Moved): each cell of [Lo, Hi)
// once.
func viewBytes(n int, kv backend.KVView, a backend.Attn, caches ...*tensor) int {
	cells := kv.Hi - kv.Lo
	m := 12*cells + 16*n
	for _, c := range caches {
		m += cells * a.KVHeads * a.HeadDim * (c.bytes / max(c.elems, 1))
	}
	return m
}
