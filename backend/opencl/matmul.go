package opencl

import (
	"github.com/glint-llm/glint/backend"
	"github.com/glint-llm/glint/dtype"
)

// mmTokens must match MM_BN in matmul.cl: tokens per mm_T work-group.
const mmTokens = 16

// mmChunk must match MM_KC in matmul.cl: columns staged per step.
const mmChunk = 128

// matShape is how the matmul kernels are launched on a device (see
// matmul.cl): mv_T groups of mvGroup work-items with up to mvLanes lanes per
// row, and mm_T groups of mmGroup rows.
type matShape struct {
	mvGroup, mvLanes, mmGroup int
	// cpu selects mmc_T over mm_T (see matmul.cl).
	cpu bool
}

// tune picks the matmul launch shapes for a device. A GPU hides memory
// latency with many threads: a SIMD width of lanes per row (the kernel's
// preferred work-group size multiple, clamped to 8…64) keeps its loads
// coalesced, and groups of a few rows leave enough groups to fill every
// compute unit. A CPU device (PoCL) runs a work-group's items in a loop on
// one core: there one work-item per row streaming the whole row is fastest,
// in groups large enough to amortise the per-group cost but numerous enough
// (≥ 8 per core for rows in the thousands) to balance the cores.
func tune(cpu bool, mv, mm *kern) matShape {
	if cpu {
		return matShape{mvGroup: min(16, mv.max), mvLanes: 1, mmGroup: min(64, mm.max), cpu: true}
	}
	lanes := pow2Floor(min(max(mv.simd, 8), 64))
	group := max(lanes, 128)
	group = pow2Floor(min(group, mv.max))
	lanes = min(lanes, group)
	return matShape{mvGroup: group, mvLanes: lanes, mmGroup: pow2Floor(min(64, mm.max))}
}

// pow2Floor is the largest power of two ≤ n (1 for n < 1).
func pow2Floor(n int) int {
	p := 1
	for p*2 <= n {
		p *= 2
	}
	return p
}

// mvUnit must match MVU_T in weights.cl: elements per matrix-vector unit.
func mvUnit(dt dtype.Type) int {
	switch dt {
	case dtype.Q8_0, dtype.Q4_0:
		return 32
	case dtype.Q6_K:
		return 64
	}
	return 16
}

// MatMulTransposed computes dst = x·wᵀ for the first n rows of x.
func (b *Backend) MatMulTransposed(dst, x, w backend.Tensor, n int) {
	const op = "MatMulTransposed"
	if !b.begin(op) {
		return
	}
	d, xt, wt := b.out(op, "dst", dst), b.own(op, "x", x), b.own(op, "w", w)
	if d == nil || xt == nil || wt == nil {
		return
	}
	wk, ok := b.byType[wt.dt]
	if !ok {
		b.shape(op, "w %v has no matmul kernel", wt)
		return
	}
	out, in := backend.Rows(wt), backend.Cols(wt)
	if n < 0 {
		b.shape(op, "n = %d", n)
		return
	}
	if !b.f32Rows(op, "x", xt, n, in) || !b.f32Rows(op, "dst", d, n, out) {
		return
	}
	if d == xt {
		b.shape(op, "dst and x are the same tensor %v", d)
		return
	}
	if n == 0 || out == 0 || !b.fits(op, "w columns", in) || !b.fits(op, "w rows", out) || !b.fits(op, "n", n) {
		return
	}
	if n == 1 {
		k := wk.mv
		// Lanes beyond the units of a row would idle: give them rows.
		units := max(in/mvUnit(wt.dt), 1)
		group := pow2Floor(min(b.mat.mvGroup, k.max))
		lanes := min(b.mat.mvLanes, pow2Floor(units), group)
		rows := group / lanes
		b.argMem(k, 0, wt.mem)
		b.argU64(k, 1, wt.bytes/out)
		b.argMem(k, 2, xt.mem)
		b.argMem(k, 3, d.mem)
		b.argI32(k, 4, in)
		b.argI32(k, 5, out)
		b.argI32(k, 6, lanes)
		b.argLocal(k, 7, 4*group)
		b.launch(k, 1, [3]int{(out + rows - 1) / rows * group, 1, 1}, [3]int{group, 1, 1})
		return
	}
	k := wk.mm
	if b.mat.cpu {
		k = wk.mmc
	}
	group := min(b.mat.mmGroup, k.max)
	b.argMem(k, 0, wt.mem)
	b.argU64(k, 1, wt.bytes/out)
	b.argMem(k, 2, xt.mem)
	b.argMem(k, 3, d.mem)
	b.argI32(k, 4, in)
	b.argI32(k, 5, out)
	b.argI32(k, 6, n)
	if !b.mat.cpu {
		b.argLocal(k, 7, 4*mmTokens*mmChunk)
	}
	b.launch(k, 2, [3]int{roundUp(out, group), (n + mmTokens - 1) / mmTokens, 1}, [3]int{group, 1, 1})
}
