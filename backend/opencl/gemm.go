package opencl

import "github.com/glint-llm/glint/dtype"

// The tiled GEMM (mmt_T, gemm.cl) is a GPU's prompt matmul. These must
// match gemm.cl: the chunk of columns staged per step (block formats, float
// weights) and each work-item's tile, TR rows × TC tokens.
const (
	mmtChunk  = 256 // MMT_KC
	mmtfChunk = 64  // MMTF_KC
	mmtTC     = 4   // MMT_TC, MMTF_TC
)

// mmtRows is MMT_TR / MMTF_TR: rows per work-item, four for one float sum
// per output (Q4_0's one-accumulator kind), two for the block formats'
// eight lanes and min terms and the float weights' up to 64 lanes.
func mmtRows(r8 bool) int {
	if r8 {
		return 4
	}
	return 2
}

// mmtShape is one mmt_T launch: the local size (tx, ty), the tile of bm
// rows × bn tokens, and the bytes of each local array in the kernel's
// order.
type mmtShape struct {
	tx, ty, bm, bn int
	// local[:nlocal] (an array, so that a launch allocates nothing).
	local  [6]int
	nlocal int
}

// locals is the bytes of the kernel's local arrays.
func (s *mmtShape) locals() []int { return s.local[:s.nlocal] }

// mmtLocal is the local memory mmt_T needs for a tile of bm rows × bn
// tokens of weight type dt (gemm.cl). The sub-scales and mins take room
// only for the formats that have them (SC_T, mmt_mins); an unused array
// gets a token four bytes.
func mmtLocal(dt dtype.Type, bm, bn int) (local [6]int, n int) {
	if !dt.Quantized() {
		return [6]int{4 * bm * (mmtfChunk + 1), 4 * bn * (mmtfChunk + 1)}, 2
	}
	at := dt.ActivationType()
	groups := mmtChunk / 16
	sc, mn := 4, 4
	switch dt {
	case dtype.Q2_K, dtype.Q3_K, dtype.Q4_K, dtype.Q5_K, dtype.Q6_K, dtype.IQ4_XS:
		sc = bm * groups
	}
	switch dt {
	case dtype.Q2_K, dtype.Q4_K, dtype.Q5_K:
		mn = bm * groups
	}
	return [6]int{
		4 * bm * (mmtChunk/4 + 1),          // wq: quants, a pitch of a chunk and one int
		sc,                                 // wsc: sub-scales per 16-element group
		mn,                                 // wmn: mins per group
		8 * bm * mmtChunk / dt.BlockSize(), // wds: each block's d and min
		4 * bn * (mmtChunk/4 + 1),          // lx: the tokens' quants
		4 * bn * mmtChunk / at.BlockSize() * actFloats(at), // xf: their scales (and sums)
	}, 6
}

// mmtPlan picks mmt_T's work-group for n tokens on this device. Token
// rows: the fewest ty of 1, 4 or 16 whose ty·TC tokens cover n (a few
// shapes only: PoCL compiles a kernel for each work-group shape), so that a
// few tokens (a batched decode step of several sequences, the output head
// over a few logits rows) do not compute a 64-token tile of padding. Weight
// rows: as many as keep the group at 256 work-items, at most 64 across. A
// GPU runs a 256-item group as eight warps or four wavefronts, enough to
// hide local-memory latency, and a 64-token tile reads and decodes each
// weight once per 64 tokens. Where the kernel's work-group limit or the
// local memory is smaller, ty and tx halve in turn (the larger first,
// tokens on a tie).
func (b *Backend) mmtPlan(k *kern, dt dtype.Type, r8 bool, n int) (mmtShape, bool) {
	tr := mmtRows(r8)
	ty := 16
	switch {
	case n <= mmtTC:
		ty = 1
	case n <= 4*mmtTC:
		ty = 4
	}
	tx := min(256/ty, 64)
	limit := k.max
	if b.gemmItems > 0 {
		limit = min(limit, b.gemmItems)
	}
	for {
		s := mmtShape{tx: tx, ty: ty, bm: tx * tr, bn: ty * mmtTC}
		s.local, s.nlocal = mmtLocal(dt, s.bm, s.bn)
		total := 0
		for _, l := range s.locals() {
			total += l
		}
		if tx*ty <= limit && int64(total) <= b.info.LocalMem {
			return s, true
		}
		switch {
		case ty > 1 && ty >= tx:
			ty /= 2
		case tx > 1:
			tx /= 2
		default:
			return mmtShape{}, false
		}
	}
}

// launchMMT queues mmt_T for the first n rows of x (set by xArgs) times
// wᵀ into d; moved is its Stats.Moved.
func (b *Backend) launchMMT(wk weightKernels, wt, d *tensor, xArgs func(*kern) int, in, out, n, moved int) {
	const op = "MatMulTransposed"
	// Q4_0's sum depends on the matrix (LK_q4_0 in quant.cl): a kernel each.
	r8 := wt.dt == dtype.Q4_0 && out%8 == 0
	k := wk.mmt
	if r8 {
		k = wk.mmtR8
	}
	if !b.made(k) {
		return
	}
	s, ok := b.mmtPlan(k, wt.dt, r8, n)
	if !ok {
		b.shape(op, "%v: no tile of the tiled GEMM fits the device's %d bytes of local memory", wt, b.info.LocalMem)
		return
	}
	a := b.matArgs(k, wt, d, xArgs, in, out)
	b.argI32(k, a, n)
	for i, l := range s.locals() {
		b.argLocal(k, a+1+i, l)
	}
	if !wt.dt.Quantized() {
		b.argI32(k, a+1+s.nlocal, int(b.flavour.FloatOrder(wt.dt, n, in, out)))
	}
	groups := [3]int{(out + s.bm - 1) / s.bm * s.tx, (n + s.bn - 1) / s.bn * s.ty, 1}
	b.launch(k, 2, groups, [3]int{s.tx, s.ty, 1}, moved)
}
