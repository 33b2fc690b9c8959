package opencl

import (
	"github.com/glint-llm/glint/backend"
	"github.com/glint-llm/glint/dtype"
)

// The backend fuses what it is given: a decode step's ops arrive one at a
// time, and a chain of them that one kernel (mvf_T, fused.cl) computes is
// held back rather than launched —
//
//	RMSNorm(d, x, g) | MatMul(o1, d, W1) [MatMul(o2, d, W2) [MatMul(o3, d, W3)]] | SiLUMul(o1, o1, o2) or Add(r, r, o1)
//
// for one token (n = 1): an RMSNorm, then up to three matmuls of one weight
// type that read its output (or, without the norm, the same activations),
// then the SiLU·mul of the first two's outputs (gate and up) or the residual
// Add of a single matmul's output. The chain is launched as soon as it can
// grow no further, and before anything else happens: any other op, a
// transfer, Sync, Err, Stats, Free or Close. Every tensor the ops write ends
// as they would leave it one by one (d, the matmul outputs, r), bit for bit:
// the kernel computes the same functions in the same order. So the model
// code stays op by op, and a Llama layer's decode step takes the launches
// of its attention plus three: RMSNorm+Q+K+V, Wo+Add, RMSNorm+gate+up+SiLU·mul
// and down+Add.

// chainMat is one held matmul.
type chainMat struct{ dst, w *tensor }

// chain is what the backend holds; held = 0: nothing.
type chain struct {
	held int
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
	res    *tensor // Add's destination (MVF_ADD)
	weight dtype.Type
}

// The kernel's flags (fused.cl).
const (
	mvfNorm = 1
	mvfAdd  = 2
	mvfSiLU = 4
)

// matIn is what the held matmuls read: the norm's output or in.
func (c *chain) matIn() *tensor {
	if c.norm {
		return c.nd
	}
	return c.in
}

// reads reports whether t is read by the chain's prologue (so that no
// group may write it while another reads it).
func (c *chain) reads(t *tensor) bool { return t == c.in || (c.norm && (t == c.g || t == c.nd)) }

// writes reports whether a held matmul writes t.
func (c *chain) writes(t *tensor) bool {
	for _, m := range c.mats[:c.nmat] {
		if m.dst == t {
			return true
		}
	}
	return false
}

// holdNorm holds RMSNorm(d, x, g) of one row, after launching what was held.
// An in-place norm is not held: group 0 would write the row the others
// read.
func (b *Backend) holdNorm(d, x, g *tensor, eps float32) bool {
	b.flush()
	if !b.fuse || d == x {
		return false
	}
	b.ch = chain{held: 1, in: x, norm: true, nd: d, g: g, eps: eps}
	return true
}

// holdMatMul holds dst = x·wᵀ of one row, joining the held chain where it
// can, and reports whether it did hold it.
func (b *Backend) holdMatMul(dst, x, w *tensor) bool {
	if !b.fuse || !b.mvfFits(w.dt, backend.Cols(w)) {
		b.flush()
		return false
	}
	c := &b.ch
	joins := c.held > 0 && c.flags&(mvfAdd|mvfSiLU) == 0 && c.nmat < len(c.mats) && x == c.matIn() &&
		(c.nmat == 0 || (w.dt == c.weight && backend.Cols(w) == backend.Cols(c.mats[0].w))) &&
		!c.reads(dst) && !c.writes(dst)
	if !joins {
		b.flush()
		b.ch = chain{in: x}
	}
	c.weight = w.dt
	c.mats[c.nmat] = chainMat{dst, w}
	c.nmat++
	c.held++
	return true
}

// holdAdd ends the chain with r = r + o where o is a single held matmul's
// output (either operand order: float addition commutes) and launches it;
// it reports whether it did.
func (b *Backend) holdAdd(r, a, o *tensor) bool {
	c := &b.ch
	if a != r {
		a, o = o, a
	}
	if c.held == 0 || c.nmat != 1 || c.flags&(mvfAdd|mvfSiLU) != 0 || a != r || o != c.mats[0].dst || r == o || c.reads(r) {
		b.flush()
		return false
	}
	c.flags |= mvfAdd
	c.res = r
	b.flush()
	return true
}

// holdSiLUMul ends the chain with gate = silu(gate)·up where gate and up are
// the two held matmuls' outputs, in that order, and launches it; it reports
// whether it did.
func (b *Backend) holdSiLUMul(dst, gate, up *tensor) bool {
	c := &b.ch
	if c.held == 0 || c.nmat != 2 || c.flags&(mvfAdd|mvfSiLU) != 0 || gate != c.mats[0].dst || up != c.mats[1].dst ||
		dst != gate || backend.Rows(c.mats[0].w) != backend.Rows(c.mats[1].w) {
		b.flush()
		return false
	}
	c.flags |= mvfSiLU
	b.flush()
	return true
}

// flush launches what the backend holds.
func (b *Backend) flush() {
	c := b.ch
	if c.held == 0 {
		return
	}
	b.ch = chain{}
	if c.nmat == 0 {
		b.launchRMSNorm(c.nd, c.in, c.g, 1, c.eps)
		return
	}
	if c.norm {
		c.flags |= mvfNorm
	}
	b.launchMVF(&c)
}

// mvfShape is how mvf_T runs K-column rows of type dt on this device: its
// kernel, work-group size, lanes per row, and local memory.
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

// launchMVF queues mvf_T for a chain (see fused.cl for the arguments).
func (b *Backend) launchMVF(c *chain) {
	w0 := c.mats[0].w
	K := backend.Cols(w0)
	k, group, lanes, local := b.mvfShape(c.weight, K)
	if k == nil {
		return
	}
	b.argMem(k, 0, c.in.mem)
	g, xn := c.in.mem, c.in.mem
	if c.norm {
		g, xn = c.g.mem, c.nd.mem
	}
	b.argMem(k, 1, g)
	b.argMem(k, 2, xn)
	b.argF32(k, 3, c.eps)
	rows := 0
	for i := range c.mats {
		m := c.mats[min(i, c.nmat-1)] // unused slots repeat the last, with no rows
		M := backend.Rows(m.w)
		if i >= c.nmat {
			M = 0
		}
		b.argMem(k, 4+4*i, m.w.mem)
		b.argU64(k, 5+4*i, m.w.bytes/max(backend.Rows(m.w), 1))
		b.argMem(k, 6+4*i, m.dst.mem)
		b.argI32(k, 7+4*i, M)
		rows += M
	}
	if c.flags&mvfSiLU != 0 {
		rows = backend.Rows(w0)
	}
	res := c.in.mem
	if c.res != nil {
		res = c.res.mem
	}
	rpp := group / lanes
	passes := (rows + rpp - 1) / rpp
	J := 1
	if b.mat.mvfGroups > 0 {
		J = (passes + b.mat.mvfGroups - 1) / b.mat.mvfGroups
	}
	at := c.weight.ActivationType()
	b.argI32(k, 16, K)
	b.argI32(k, 17, lanes)
	b.argI32(k, 18, J)
	b.argI32(k, 19, int(c.flags))
	b.argMem(k, 20, res)
	b.argLocal(k, 21, roundUp(K, 4))
	b.argLocal(k, 22, 4*actFloats(at)*(K/at.BlockSize()))
	b.argLocal(k, 23, local-roundUp(K, 4)-4*actFloats(at)*(K/at.BlockSize()))
	b.launch(k, 1, [3]int{(passes + J - 1) / J * group, 1, 1}, [3]int{group, 1, 1})
}
