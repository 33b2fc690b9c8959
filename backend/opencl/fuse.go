package opencl

import (
	"github.com/glint-llm/glint/backend"
	"github.com/glint-llm/glint/dtype"
)

// The backend fuses what it is given: a decode step's ops arrive one at a
// time, and a chain of them that one kernel (mvf_T, fused.cl) computes is
// held back rather than launched —
//
//	RMSNorm(d, x, g)
//	MatMul(o1, d, W1) [MatMul(o2, d, W2) [MatMul(o3, d, W3)]]
//	RoPE(oi) and CopySlice(cache, off, oi) of those outputs, or
//	SiLUMul(o1, o1, o2), or Add(r, r, o1)
//
// for one token (n = 1): an RMSNorm, then up to three matmuls of one weight
// type that read its output (or, without the norm, the same activations),
// then RoPE of their outputs and their appends to the KV cache (Q, K, V),
// or the SiLU·mul of the first two (gate and up), or the residual Add of a
// single matmul's output (Wo, down). A matmul of another type that reads
// the same activations (a Q4_K_M layer's Q6_K V) starts a second chain held
// beside the first. Held chains launch, in order, as soon as an op cannot
// join them, and before anything else happens: any other op, a transfer,
// Sync, Err, Stats, Free or Close. Every tensor the ops write ends as they
// would leave it one by one (the norm's output, each matmul's, the cache
// rows, the residual), bit for bit: the kernel computes the same functions
// in the same order. So the model code stays op by op, and a Llama layer's
// decode step takes five launches: RMSNorm+Q+K+V+RoPE+append, attention,
// Wo+Add, RMSNorm+gate+up+SiLU·mul and down+Add.

// The kernel's flags (fused.cl).
const (
	mvfNorm = 1
	mvfAdd  = 2
	mvfSiLU = 4
	mvfRoPE = 8
	mvfNeoX = 16
	// SiLU in the AVX-512 build's arithmetic (Backend.lanes 16), else AVX2's.
	mvfSiLU16 = 64
	// per matrix
	mfRoPE  = 1
	mfStore = 2
	mfF16   = 4
)

// chainMat is one held matmul and where its rows go besides dst.
type chainMat struct {
	dst, w *tensor
	mf     int32   // mfRoPE, mfStore, mfF16
	cache  *tensor // with mfStore: the KV cache it appends to, at coff
	coff   int
}

// chain is one held mvf_T launch.
type chain struct {
	// in is the activation row the kernel reads: the norm's input, or the
	// matmuls' x where there is no norm.
	in *tensor
	// norm: RMSNorm(nd, in, g, eps) comes first.
	norm   bool
	nd, g  *tensor
	eps    float32
	mats   [3]chainMat
	nmat   int
	flags  int32
	res    *tensor // Add's destination (mvfAdd)
	weight dtype.Type
	// With mvfRoPE: position pos[0], heads of hd rows, the first dims of
	// each turned by the cos and sin in rope (rope.go).
	pos      *tensor
	rope     *ropeTable
	hd, dims int
}

// matIn is what the held matmuls read: the norm's output or in.
func (c *chain) matIn() *tensor {
	if c.norm {
		return c.nd
	}
	return c.in
}

// open reports whether RoPE or appends may still join c.
func (c *chain) open() bool { return c.flags&(mvfAdd|mvfSiLU) == 0 }

// plain reports whether matmuls may still join c: nothing but matmuls yet.
func (c *chain) plain() bool {
	for _, m := range c.mats[:c.nmat] {
		if m.mf != 0 {
			return false
		}
	}
	return c.open() && c.flags&mvfRoPE == 0
}

// reads reports whether c's prologue reads t, so that no group of it may
// write t while another reads it.
func (c *chain) reads(t *tensor) bool { return t == c.in || (c.norm && t == c.g) }

// writes reports whether c writes t.
func (c *chain) writes(t *tensor) bool {
	if (c.norm && t == c.nd) || t == c.res {
		return true
	}
	for _, m := range c.mats[:c.nmat] {
		if m.dst == t || m.cache == t {
			return true
		}
	}
	return false
}

// held lists the chains held: one, or two that read the same activations.
func (b *Backend) held() []chain { return b.chains[:b.nchains] }

// touches reports whether a held chain reads or writes t.
func (b *Backend) touches(t *tensor) bool {
	for i := range b.held() {
		if c := &b.chains[i]; c.reads(t) || c.writes(t) {
			return true
		}
	}
	return false
}

// hold starts a new chain after launching what is held.
func (b *Backend) hold(c chain) {
	b.flush()
	b.chains[0], b.nchains = c, 1
}

// holdNorm holds RMSNorm(d, x, g) of one row. An in-place norm is not
// held: group 0 would write the row the others read.
func (b *Backend) holdNorm(d, x, g *tensor, eps float32) bool {
	if !b.fuse || d == x {
		b.flush()
		return false
	}
	b.hold(chain{in: x, norm: true, nd: d, g: g, eps: eps})
	return true
}

// holdMatMul holds dst = x·wᵀ of one row, joining a held chain where it can
// or beside the one held, and reports whether it held it.
func (b *Backend) holdMatMul(dst, x, w *tensor) bool {
	K := backend.Cols(w)
	if !b.fuse || !b.mvfFits(w.dt, K) {
		b.flush()
		return false
	}
	if !b.touches(dst) {
		for i := range b.held() {
			c := &b.chains[i]
			if c.plain() && c.nmat < len(c.mats) && x == c.matIn() &&
				(c.nmat == 0 || (w.dt == c.weight && K == backend.Cols(c.mats[0].w) && sameKind(w, c.mats[0].w))) {
				c.weight = w.dt
				c.mats[c.nmat] = chainMat{dst: dst, w: w}
				c.nmat++
				return true
			}
		}
		// Another type on the same activations: a second chain beside the
		// first, which it follows in the queue (so it may read the first's
		// norm output as written).
		if b.nchains == 1 && b.chains[0].nmat > 0 && b.chains[0].plain() && x == b.chains[0].matIn() {
			b.chains[1], b.nchains = chain{in: x, weight: w.dt, nmat: 1, mats: [3]chainMat{{dst: dst, w: w}}}, 2
			return true
		}
	}
	b.hold(chain{in: x, weight: w.dt, nmat: 1, mats: [3]chainMat{{dst: dst, w: w}}})
	return true
}

// sameKind reports whether matrices v and w sum their rows alike: Q4_0's
// order depends on the rows (a multiple of 8 takes ggml's repacked gemv,
// LK_q4_0 in quant.cl), and mvf_T decides it once for all its matrices.
func sameKind(v, w *tensor) bool {
	return v.dt != dtype.Q4_0 || (backend.Rows(v)%8 == 0) == (backend.Rows(w)%8 == 0)
}

// heldMat finds the held matmul whose output is t.
func (b *Backend) heldMat(t *tensor) (*chain, int) {
	for i := range b.held() {
		c := &b.chains[i]
		for m := range c.mats[:c.nmat] {
			if c.mats[m].dst == t {
				return c, m
			}
		}
	}
	return nil, 0
}

// holdRoPE adds RoPE of one row of x to the held matmul whose output x is,
// and reports whether it did. Its heads must not straddle a work-group:
// the matrices before it must be whole heads, and all RoPEs of a chain
// share their position and rope.
func (b *Backend) holdRoPE(x *tensor, heads, hd int, pos *tensor, r backend.Rope, tab *ropeTable) bool {
	c, m := b.heldMat(x)
	ok := c != nil && c.open() && c.mats[m].mf == 0 && backend.Rows(c.mats[m].w) == heads*hd
	for i := 0; ok && i < m; i++ {
		ok = backend.Rows(c.mats[i].w)%hd == 0
	}
	if ok && c.flags&mvfRoPE != 0 {
		ok = c.pos == pos && c.rope == tab && c.hd == hd && c.dims == r.Dims && (c.flags&mvfNeoX != 0) == r.NeoX
	}
	if ok {
		// The group's heads must fit its local memory too.
		cc := *c
		cc.flags |= mvfRoPE
		if r.NeoX {
			cc.flags |= mvfNeoX
		}
		cc.pos, cc.rope, cc.hd, cc.dims = pos, tab, hd, r.Dims
		cc.mats[m].mf |= mfRoPE
		if _, _, _, _, _, fits := b.mvfLaunch(&cc); fits {
			*c = cc
			return true
		}
	}
	b.flush()
	return false
}

// holdStore adds CopySlice(dst, off, src, 0, rows) of a held matmul's whole
// output src (the KV-cache append) to it, and reports whether it did.
func (b *Backend) holdStore(dst *tensor, off int, src *tensor, srcOff, count int) bool {
	c, m := b.heldMat(src)
	if c == nil || !c.open() || c.mats[m].mf&mfStore != 0 || srcOff != 0 || count != backend.Rows(c.mats[m].w) ||
		src.dt != dtype.F32 || (dst.dt != dtype.F32 && dst.dt != dtype.F16) || b.touches(dst) {
		b.flush()
		return false
	}
	c.mats[m].mf |= mfStore
	if dst.dt == dtype.F16 {
		c.mats[m].mf |= mfF16
	}
	c.mats[m].cache, c.mats[m].coff = dst, off
	return true
}

// holdAdd ends the one held chain with r = r + o where o is its single
// matmul's output (either operand order: float addition commutes) and
// launches it; it reports whether it did.
func (b *Backend) holdAdd(r, a, o *tensor) bool {
	c := &b.chains[0]
	if a != r {
		a, o = o, a
	}
	if b.nchains != 1 || c.nmat != 1 || !c.open() || c.mats[0].mf != 0 || a != r || o != c.mats[0].dst || b.touches(r) {
		b.flush()
		return false
	}
	c.flags |= mvfAdd
	c.res = r
	b.flush()
	return true
}

// holdSiLUMul ends the one held chain with gate = silu(gate)·up where gate
// and up are its two matmuls' outputs, in that order, and launches it; it
// reports whether it did.
func (b *Backend) holdSiLUMul(dst, gate, up *tensor) bool {
	c := &b.chains[0]
	if b.nchains != 1 || c.nmat != 2 || !c.open() || c.mats[0].mf|c.mats[1].mf != 0 || gate != c.mats[0].dst ||
		up != c.mats[1].dst || dst != gate || backend.Rows(c.mats[0].w) != backend.Rows(c.mats[1].w) {
		b.flush()
		return false
	}
	c.flags |= mvfSiLU
	if b.flavour.Wide() {
		c.flags |= mvfSiLU16
	}
	b.flush()
	return true
}

// flush launches what the backend holds, in order.
func (b *Backend) flush() {
	if b.nchains == 0 {
		return
	}
	cs := b.chains
	n := b.nchains
	b.nchains = 0
	for i := range n {
		c := &cs[i]
		if c.nmat == 0 {
			b.launchRMSNorm(c.nd, c.in, c.g, 1, c.eps)
			continue
		}
		if c.norm {
			c.flags |= mvfNorm
		}
		b.launchMVF(c)
	}
}

// mvfShape is how mvf_T runs K-column rows of type dt on this device: its
// kernel, work-group size, lanes per row, and the local memory of the
// activations and the scratch li.
func (b *Backend) mvfShape(dt dtype.Type, K int) (k *kern, group, lanes, local int) {
	k = b.byType[dt].mvf
	if k == nil || !b.made(k) {
		return nil, 0, 0, 0
	}
	units := max(K/mvUnit(dt), 1)
	group = pow2Floor(min(b.mat.mvGroup, k.max))
	lanes = min(b.mat.mvLanes, pow2Floor(units), group)
	at := dt.ActivationType()
	records := 4 * lanesRecord * (group / lanes) * max(lanes, dt.BlockSize()/mvUnit(dt))
	local = roundUp(K, 4) + 4*actFloats(at)*(K/at.BlockSize()) + max(8*group, records)
	return k, group, lanes, local
}

// mvfFits reports whether mvf_T takes a K-column matrix of type dt on this
// device: a block format whose rounded activation row fits local memory.
func (b *Backend) mvfFits(dt dtype.Type, K int) bool {
	if !dt.Quantized() {
		return false
	}
	k, _, _, local := b.mvfShape(dt, K)
	return k != nil && int64(local) <= b.info.LocalMem
}

// mvfLaunch is a chain's launch: kernel, work-group size, lanes, passes per
// group J, groups, and whether its local memory fits the device.
func (b *Backend) mvfLaunch(c *chain) (k *kern, group, lanes, J, groups int, fits bool) {
	k, group, lanes, local := b.mvfShape(c.weight, backend.Cols(c.mats[0].w))
	if k == nil {
		return nil, 0, 0, 0, 0, false
	}
	rows := 0
	for _, m := range c.mats[:c.nmat] {
		rows += backend.Rows(m.w)
	}
	if c.flags&mvfSiLU != 0 {
		rows = backend.Rows(c.mats[0].w)
	}
	rpp := group / lanes
	passes := (rows + rpp - 1) / rpp
	J = 1
	if b.mat.mvfGroups > 0 {
		J = (passes + b.mat.mvfGroups - 1) / b.mat.mvfGroups
	}
	if c.flags&mvfRoPE != 0 {
		// A group's rows, J·rpp, are whole heads.
		step := c.hd / gcd(c.hd, rpp)
		J = roundUp(J, step)
		local += 4 * J * rpp
	}
	return k, group, lanes, J, (passes + J - 1) / J, int64(local) <= b.info.LocalMem
}

func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// launchMVF queues mvf_T for a chain (see fused.cl for the arguments).
func (b *Backend) launchMVF(c *chain) {
	k, group, lanes, J, groups, _ := b.mvfLaunch(c)
	if k == nil {
		return
	}
	K := backend.Cols(c.mats[0].w)
	b.argMem(k, 0, c.in.mem)
	g, xn := c.in.mem, c.in.mem
	if c.norm {
		g, xn = c.g.mem, c.nd.mem
	}
	b.argMem(k, 1, g)
	b.argMem(k, 2, xn)
	b.argF32(k, 3, c.eps)
	for i := range c.mats {
		m := c.mats[min(i, c.nmat-1)] // unused slots repeat the last, with no rows
		M, mf, cache := backend.Rows(m.w), m.mf, m.dst
		if i >= c.nmat {
			M, mf = 0, 0
		}
		if mf&mfStore != 0 {
			cache = m.cache
		}
		a := 4 + 7*i
		b.argMem(k, a, m.w.mem)
		b.argU64(k, a+1, m.w.bytes/max(backend.Rows(m.w), 1))
		b.argMem(k, a+2, m.dst.mem)
		b.argI32(k, a+3, M)
		b.argI32(k, a+4, int(mf))
		b.argMem(k, a+5, cache.mem)
		b.argU64(k, a+6, m.coff)
	}
	res, pos, cs, lo := c.in.mem, c.in.mem, c.in.mem, int32(0)
	if c.res != nil {
		res = c.res.mem
	}
	if c.pos != nil {
		pos, cs, lo = c.pos.mem, c.rope.mem, c.rope.lo
	}
	at := c.weight.ActivationType()
	xd := 4 * actFloats(at) * (K / at.BlockSize())
	_, _, _, local := b.mvfShape(c.weight, K)
	b.argI32(k, 25, K)
	b.argI32(k, 26, lanes)
	b.argI32(k, 27, J)
	b.argI32(k, 28, int(c.flags))
	b.argMem(k, 29, res)
	b.argMem(k, 30, pos)
	b.argI32(k, 31, int(lo))
	b.argMem(k, 32, cs)
	b.argI32(k, 33, max(c.hd, 1))
	b.argI32(k, 34, c.dims)
	b.argLocal(k, 35, roundUp(K, 4))
	b.argLocal(k, 36, xd)
	b.argLocal(k, 37, local-roundUp(K, 4)-xd)
	ys := 4
	if c.flags&mvfRoPE != 0 {
		ys = 4 * J * group / lanes
	}
	b.argLocal(k, 38, ys)
	b.launch(k, 1, [3]int{groups * group, 1, 1}, [3]int{group, 1, 1}, c.moved())
}

// moved is what the chain's launch reads and writes (Stats.Moved): the
// activation row (and with the norm its weights and output), each matrix
// and its output row, the cache rows and the residual.
func (c *chain) moved() int {
	K := backend.Cols(c.mats[0].w)
	n := 4 * K
	if c.norm {
		n += 8 * K
	}
	for _, m := range c.mats[:c.nmat] {
		M := backend.Rows(m.w)
		n += m.w.bytes + 4*M
		if m.mf&mfStore != 0 {
			n += M * m.cache.bytes / max(m.cache.elems, 1)
		}
	}
	if c.res != nil {
		n += 8 * backend.Rows(c.mats[0].w)
	}
	return n
}
