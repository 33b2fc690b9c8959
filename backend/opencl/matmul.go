package opencl

import (
	"fmt"

	"github.com/glint-llm/glint/backend"
	"github.com/glint-llm/glint/backend/opencl/cl"
	"github.com/glint-llm/glint/dtype"
	"github.com/glint-llm/glint/numerics"
)

// mmTokens must match MM_BN in matmul.cl: tokens per mmc_T work-item.
const mmTokens = 16

// matShape is how the matmul kernels are launched on a device (see
// matmul.cl): mv_T groups of mvGroup work-items with up to mvLanes lanes per
// row, and on a CPU device mmc_T groups of mmGroup rows (a GPU's prompts
// take mmt_T, whose tile mmtPlan picks).
type matShape struct {
	mvGroup, mvLanes, mmGroup int
	// mvfGroups, when positive, caps the work-groups of a fused decode
	// matmul (mvf_T), each then taking several passes of rows: every group
	// repeats the activation prologue.
	mvfGroups int
	// cpu selects mmc_T over mmt_T (see matmul.cl).
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
func tune(cpu bool, cus int, mv, mmc *kern) matShape {
	if cpu {
		// A fused decode matmul in about four groups per core: enough to
		// balance them, few enough that the repeated prologue stays small.
		return matShape{mvGroup: min(16, mv.max), mvLanes: 1, mmGroup: min(64, mmc.max), mvfGroups: 4 * max(cus, 1), cpu: true}
	}
	lanes := pow2Floor(min(max(mv.simd, 8), 64))
	group := max(lanes, 128)
	group = pow2Floor(min(group, mv.max))
	lanes = min(lanes, group)
	return matShape{mvGroup: group, mvLanes: lanes}
}

// pow2Floor is the largest power of two ≤ n (1 for n < 1).
func pow2Floor(n int) int {
	p := 1
	for p*2 <= n {
		p *= 2
	}
	return p
}

// mvUnit is the elements a matrix-vector lane takes at a time and must
// match MVU_T in weights.cl for the plain types and QU_T in quant.cl for
// the block formats: 64 for Q2_K … Q6_K, 32 for IQ4_XS (a sub-block) and
// the 32-element types.
func mvUnit(dt dtype.Type) int {
	switch {
	case dt == dtype.Q2_K || dt == dtype.Q3_K || dt == dtype.Q4_K || dt == dtype.Q5_K || dt == dtype.Q6_K:
		return 64
	case dt.Quantized():
		return 32
	}
	return 16
}

// MatMulTransposed computes dst = x·wᵀ for the first n rows of x.
func (b *Backend) MatMulTransposed(dst, x, w backend.Tensor, n int) {
	b.matMul("MatMulTransposed", dst, x, w, n, false)
}

// MatMulDecode is MatMulTransposed by the one-token kernels (mv_T, mvq_T),
// once per row: a second launch dimension over the rows.
func (b *Backend) MatMulDecode(dst, x, w backend.Tensor, n int) {
	b.matMul("MatMulDecode", dst, x, w, n, true)
}

func (b *Backend) matMul(op string, dst, x, w backend.Tensor, n int, decode bool) {
	if !b.enter(op) {
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
	if n == 1 && b.holdMatMul(d, xt, wt) {
		return
	}
	// Block formats read activations rounded as dtype.RoundActivations
	// defines, from b.act (quant.cl); their kernels take the quants and
	// the scales where the float kernels take x, one argument further on.
	// F16 and BF16 weights round their activations too, once into b.act.q
	// for all output rows, except that on a GPU mv rounds as it reads
	// (CPU_VARIANT in weights.cl says why).
	xm := xt.mem
	xArgs := func(k *kern) int {
		if wk.quant == nil {
			b.argMem(k, 2, xm)
			return 3
		}
		b.argMem(k, 2, b.act.q)
		b.argMem(k, 3, b.act.d)
		return 4
	}
	switch {
	case wk.quant != nil:
		if !b.quantize(op, xt, n, in, wt.dt.ActivationType(), wk.quant) {
			return
		}
	case wk.round != nil && (n > 1 && !decode || b.mat.cpu):
		if !b.quantize(op, xt, n, in, wt.dt.ActivationType(), wk.round) {
			return
		}
		xm = b.act.q
	}
	// What the matmul reads and writes (Stats.Moved): the weights, the
	// activations as the kernel reads them (a block format's rounded quants
	// and their scales) and the output.
	xBytes := 4 * n * in
	if wk.quant != nil {
		at := wt.dt.ActivationType()
		xBytes = n*in + 4*actFloats(at)*(n*in/at.BlockSize())
	}
	moved := wt.bytes + xBytes + 4*n*out
	if n == 1 || decode {
		k := wk.mv
		if !b.made(k) {
			return
		}
		// Lanes beyond the units of a row would idle: give them rows.
		units := max(in/mvUnit(wt.dt), 1)
		group := pow2Floor(min(b.mat.mvGroup, k.max))
		lanes := min(b.mat.mvLanes, pow2Floor(units), group)
		rows := group / lanes
		a := b.matArgs(k, wt, d, xArgs, in, out)
		b.argI32(k, a, lanes)
		// mv_T reduces floats; mvq_T holds, per row, lanesRecord ints for
		// each unit of a chunk of max(lanes, units per block) (quant.cl).
		local := 4 * group
		if wk.quant != nil {
			local = 4 * lanesRecord * rows * max(lanes, wt.dt.BlockSize()/mvUnit(wt.dt))
		}
		b.argLocal(k, a+1, local)
		if wk.quant == nil {
			b.argI32(k, a+2, int(b.flavour.FloatOrder(wt.dt, 1, in, out)))
		}
		b.launch(k, 2, [3]int{(out + rows - 1) / rows * group, n, 1}, [3]int{group, 1, 1}, moved)
		return
	}
	// Float weights sum in llama.cpp's order (numerics.Order), which keys
	// and values over an f32 cache carry to the scores unrounded: mmc_T
	// keeps tinyBLAS's float lanes, mmt_T every order.
	order := b.flavour.FloatOrder(wt.dt, n, in, out)
	if !b.mat.cpu || (!wt.dt.Quantized() && (order != numerics.SumTiny8 && order != numerics.SumTiny16 || in%16 != 0)) {
		b.launchMMT(wk, wt, d, xArgs, in, out, n, moved)
		return
	}
	k := wk.mmc
	if !b.made(k) {
		return
	}
	group := min(b.mat.mmGroup, k.max)
	a := b.matArgs(k, wt, d, xArgs, in, out)
	b.argI32(k, a, n)
	if !wt.dt.Quantized() {
		b.argI32(k, a+1, int(order))
	}
	b.launch(k, 2, [3]int{roundUp(out, group), (n + mmTokens - 1) / mmTokens, 1}, [3]int{group, 1, 1}, moved)
}

// numerics.SumTiny8 and SumTiny16 are FS_TINY8 and FS_TINY16 in weights.cl.

// lanesRecord must match LREC in quant.cl: the ints mvq_T keeps per unit.
const lanesRecord = 20

// q8kFloats must match Q8K_F in quant.cl: the floats stored per Q8_K block,
// its scale and its sixteen group sums.
const q8kFloats = 17

// actFloats is the number of floats quant.cl stores per block of activation
// type at (XDN_T): the scale, then Q8_1's block sum or Q8_K's group sums.
func actFloats(at dtype.Type) int {
	switch at {
	case dtype.Q8_1:
		return 2
	case dtype.Q8_K:
		return q8kFloats
	}
	return 1
}

// actScratch is the device copy of a matmul's activations rounded to an
// activation type (quant.cl): int8 quants q (row i at byte i·K) and float
// scales d (actFloats per block: row i at actFloats·i·K/block); for F16 and
// BF16 weights, q holds the rounded activations as floats (round_act_T,
// matmul.cl) and d is unused.
// It is grown, never shrunk, so a model allocates it at its first prefill
// and decodes without allocating.
//
// src, ver, at, rows and cols say what it holds: the first rows rows of
// tensor src at version ver, rounded to at. Consecutive matmuls on the same
// unchanged activations (Q, K and V; gate and up) quantise them once.
type actScratch struct {
	q, d           cl.Mem
	qBytes, dBytes int

	src        *tensor
	ver        uint64
	at         dtype.Type
	rows, cols int
}

// quantize rounds the first n rows of x (k columns) to activation type at
// into b.act, unless it already holds them, and reports whether it may be
// used. For F16 and BF16 (qk is round_act_T) b.act.q holds the rounded
// floats and b.act.d is unused.
func (b *Backend) quantize(op string, x *tensor, n, k int, at dtype.Type, qk *kern) bool {
	a := &b.act
	if a.src == x && a.ver == x.ver && a.at == at && a.cols == k && a.rows >= n {
		return true
	}
	a.src = nil
	if !b.made(qk) {
		return false
	}
	if at == dtype.F16 || at == dtype.BF16 {
		// The rounded values stay floats, in q: the float kernels read them
		// as they would read x.
		if !b.fits(op, "activation elements", n*k) || !b.grow(op, &a.q, &a.qBytes, 4*n*k) {
			return false
		}
		b.argMem(qk, 0, x.mem)
		b.argMem(qk, 1, a.q)
		b.argI32(qk, 2, n*k)
		b.launch(qk, 1, [3]int{roundUp(n*k, qk.wg), 1, 1}, [3]int{qk.wg, 1, 1}, 8*n*k)
		if b.err != nil {
			return false
		}
		a.src, a.ver, a.at, a.rows, a.cols = x, x.ver, at, n, k
		return true
	}
	block := at.BlockSize()
	qBytes, dBytes := n*k, 4*actFloats(at)*(n*k/block)
	if !b.grow(op, &a.q, &a.qBytes, qBytes) || !b.grow(op, &a.d, &a.dBytes, dBytes) {
		return false
	}
	b.argMem(qk, 0, x.mem)
	b.argMem(qk, 1, a.q)
	b.argMem(qk, 2, a.d)
	b.argI32(qk, 3, k)
	switch at {
	case dtype.Q8_0, dtype.Q8_1:
		b.launch(qk, 2, [3]int{roundUp(k/block, qk.wg), n, 1}, [3]int{qk.wg, 1, 1}, 4*n*k+qBytes+dBytes)
	case dtype.Q8_K:
		L := min(qk.wg, block)
		b.argLocal(qk, 4, 4*L)
		b.argLocal(qk, 5, 4*L)
		b.launch(qk, 2, [3]int{k / block * L, n, 1}, [3]int{L, 1, 1}, 4*n*k+qBytes+dBytes)
	default:
		b.shape(op, "no quantiser for activation type %v", at)
		return false
	}
	if b.err != nil {
		return false
	}
	a.src, a.ver, a.at, a.rows, a.cols = x, x.ver, at, n, k
	return true
}

// grow makes *m hold at least need bytes, replacing it when it is smaller.
// Queued kernels that still read the old buffer keep it alive (OpenCL
// defers the release).
func (b *Backend) grow(op string, m *cl.Mem, have *int, need int) bool {
	if need <= *have {
		return true
	}
	m.Release()
	*m, *have = cl.Mem{}, 0
	nm, err := b.ctx.NewBuffer(max(need, 4))
	if err != nil {
		b.fail(fmt.Errorf("opencl: %s: activation scratch of %s: %w", op, size(int64(need)), err))
		return false
	}
	*m, *have = nm, need
	return true
}

// matArgs sets the arguments every matmul kernel starts with: the weights
// and their row stride, the activations (xArgs), dst, in and out. It
// returns the index of the next.
func (b *Backend) matArgs(k *kern, wt, d *tensor, xArgs func(*kern) int, in, out int) int {
	b.argMem(k, 0, wt.mem)
	b.argU64(k, 1, wt.bytes/out)
	a := xArgs(k)
	b.argMem(k, a, d.mem)
	b.argI32(k, a+1, in)
	b.argI32(k, a+2, out)
	return a + 3
}
