package opencl

import (
	"strconv"
	"strings"

	"github.com/glint-llm/glint/backend"
	"github.com/glint-llm/glint/backend/opencl/cl"
	"github.com/glint-llm/glint/dtype"
)

// The backend fuses what it is given: a decode step's ops arrive one at a
// time, and a chain of them that one kernel (mvf_T, fused.cl) computes is
// held back rather than launched. What may follow what in a chain is
// declared once, in fusions, and each op that may be held offers itself to
// the held chains through join (or starts one): an RMSNorm, then up to
// three matmuls of one weight type that read its output (or, without the
// norm, the same activations), then RoPE of their outputs and their appends
// to the KV cache (Q, K, V), or the SiLU·mul of the first two (gate and up),
// or the residual Add of a single matmul's output (Wo, down). A matmul of
// another type that reads the same activations (a Q4_K_M layer's Q6_K V)
// starts a second chain held beside the first. Held chains launch, in
// order, as soon as a chain fills its fusion, or before anything else is
// queued (launch, the transfers, Sync, Err, Stats, Free, Close all flush
// first). Every tensor the ops write ends as they would leave it one by one
// (the norm's output, each matmul's, the cache rows, the residual), bit for
// bit: the kernel computes the same functions in the same order. So the
// model code stays op by op, and a Llama layer's decode step takes five
// launches: RMSNorm+Q+K+V+RoPE+append, attention, Wo+Add,
// RMSNorm+gate+up+SiLU·mul and down+Add.

// stepKind is an op as a held chain records it.
type stepKind uint8

const (
	stepNorm    stepKind = iota + 1 // RMSNorm of one row
	stepMatMul                      // MatMulTransposed of one row
	stepRoPE                        // RoPE of a held matmul's output
	stepStore                       // CopySlice of a held matmul's whole output: the KV-cache append
	stepSiLUMul                     // SiLUMul of the two held matmuls' outputs
	stepAdd                         // Add of the held matmul's output to the residual
	stepKinds
)

// stepNames name the steps in a fused launch's profile name (fusedName).
var stepNames = [stepKinds]string{stepNorm: "norm", stepMatMul: "matmul", stepRoPE: "rope", stepStore: "copy",
	stepSiLUMul: "silu_mul", stepAdd: "add"}

// stepSet is a set of step kinds.
type stepSet uint8

func kinds(ks ...stepKind) stepSet {
	var s stepSet
	for _, k := range ks {
		s |= 1 << k
	}
	return s
}

func (s stepSet) has(k stepKind) bool { return s&(1<<k) != 0 }

// stage is a run of min to max steps of the kinds it takes, in any order.
type stage struct {
	kinds    stepSet
	min, max int
}

// fusions declares the chains mvf_T computes as one launch, each a sequence
// of stages; a stage takes no kind its neighbours take (TestFusions). The
// steps a chain holds are always a prefix of one; a chain that fills every
// fusion it is a prefix of launches at once, any other when an op cannot
// join it. A new fusion is a line here, the kernel flag of what it computes
// (fused.cl) and, for a new kind of step, the check of its operands in the
// op that offers it (hold*, below).
var fusions = [...][]stage{
	// RMSNorm; Q, K, V; RoPE of Q and K and the appends of K and V to the
	// KV cache.
	{{kinds(stepNorm), 0, 1}, {kinds(stepMatMul), 1, 3}, {kinds(stepRoPE, stepStore), 0, 6}},
	// RMSNorm; gate, up; SiLU·mul.
	{{kinds(stepNorm), 0, 1}, {kinds(stepMatMul), 2, 2}, {kinds(stepSiLUMul), 1, 1}},
	// Wo or down; the residual Add.
	{{kinds(stepNorm), 0, 1}, {kinds(stepMatMul), 1, 1}, {kinds(stepAdd), 1, 1}},
}

// maxSteps is the most steps a fusion takes (TestFusions).
const maxSteps = 10

// match reports whether the kinds ks are a prefix of fusion f, and whether
// they fill it: nothing may follow them.
func match(f []stage, ks []stepKind) (prefix, full bool) {
	i := 0
	for si, s := range f {
		n := 0
		for i < len(ks) && n < s.max && s.kinds.has(ks[i]) {
			i++
			n++
		}
		if i == len(ks) {
			return true, si == len(f)-1 && n == s.max
		}
		if n < s.min {
			return false, false
		}
	}
	return false, false
}

// follows reports whether a step of kind k may follow the steps ks in a
// fusion, and whether it then fills every fusion it is a prefix of.
func follows(ks []stepKind, k stepKind) (ok, full bool) {
	if len(ks) >= maxSteps {
		return false, false
	}
	var buf [maxSteps]stepKind
	n := copy(buf[:], ks)
	buf[n] = k
	full = true
	for _, f := range fusions {
		if p, fl := match(f, buf[:n+1]); p {
			ok, full = true, full && fl
		}
	}
	return ok, ok && full
}

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
	// steps[:nsteps] are the ops held, a prefix of a fusion.
	steps  [maxSteps]stepKind
	nsteps int
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

// kinds is what c holds.
func (c *chain) kinds() []stepKind { return c.steps[:c.nsteps] }

// matIn is what the held matmuls read: the norm's output or in.
func (c *chain) matIn() *tensor {
	if c.norm {
		return c.nd
	}
	return c.in
}

// plain reports whether c holds nothing but a norm and matmuls.
func (c *chain) plain() bool {
	for _, k := range c.kinds() {
		if k != stepNorm && k != stepMatMul {
			return false
		}
	}
	return true
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

// matOf is the index of the held matmul whose output is t, or -1.
func (c *chain) matOf(t *tensor) int {
	for m := range c.mats[:c.nmat] {
		if c.mats[m].dst == t {
			return m
		}
	}
	return -1
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

// join offers an op of kind k to the held chains in order: the first that
// may take it next (fusions) and whose operands it fits (fits, which then
// records the op in the chain) takes it, and launches at once if the op
// fills its fusion. It reports whether a chain took the op; if none did,
// what is held stays held until the op's own launch flushes it.
func (b *Backend) join(k stepKind, fits func(c *chain) bool) bool {
	if !b.fuse {
		return false
	}
	for i := range b.held() {
		c := &b.chains[i]
		ok, full := follows(c.kinds(), k)
		if !ok || !fits(c) {
			continue
		}
		c.steps[c.nsteps] = k
		c.nsteps++
		if full {
			b.flush()
		}
		return true
	}
	return false
}

// start launches what is held and holds c, which is one op of kind k, in
// its place; beside, it holds c after the one chain held instead.
func (b *Backend) start(k stepKind, c chain, beside bool) bool {
	if ok, _ := follows(nil, k); !ok || !b.fuse {
		return false
	}
	c.steps[0], c.nsteps = k, 1
	if beside {
		b.chains[1], b.nchains = c, 2
		return true
	}
	b.flush()
	b.chains[0], b.nchains = c, 1
	return true
}

// holdNorm holds RMSNorm(d, x, g) of one row. An in-place norm is not
// held: group 0 would write the row the others read.
func (b *Backend) holdNorm(d, x, g *tensor, eps float32) bool {
	return d != x && b.start(stepNorm, chain{in: x, norm: true, nd: d, g: g, eps: eps}, false)
}

// holdMatMul holds dst = x·wᵀ of one row, joining a held chain where it can
// or beside the one held, and reports whether it held it.
func (b *Backend) holdMatMul(dst, x, w *tensor) bool {
	K := backend.Cols(w)
	if !b.fuse || !b.mvfFits(w.dt, K) {
		return false
	}
	m := chainMat{dst: dst, w: w}
	if !b.touches(dst) {
		if b.join(stepMatMul, func(c *chain) bool {
			if x != c.matIn() || (c.nmat > 0 && (w.dt != c.weight || K != backend.Cols(c.mats[0].w) || !sameKind(w, c.mats[0].w))) {
				return false
			}
			c.weight = w.dt
			c.mats[c.nmat] = m
			c.nmat++
			return true
		}) {
			return true
		}
		// Another type on the same activations: a second chain beside the
		// first, which it follows in the queue (so it may read the first's
		// norm output as written).
		if c := &b.chains[0]; b.nchains == 1 && c.nmat > 0 && c.plain() && x == c.matIn() {
			return b.start(stepMatMul, chain{in: x, weight: w.dt, nmat: 1, mats: [3]chainMat{m}}, true)
		}
	}
	return b.start(stepMatMul, chain{in: x, weight: w.dt, nmat: 1, mats: [3]chainMat{m}}, false)
}

// sameKind reports whether matrices v and w sum their rows alike: Q4_0's
// order depends on the rows (a multiple of 8 takes ggml's repacked gemv,
// LK_q4_0 in quant.cl), and mvf_T decides it once for all its matrices.
func sameKind(v, w *tensor) bool {
	return v.dt != dtype.Q4_0 || (backend.Rows(v)%8 == 0) == (backend.Rows(w)%8 == 0)
}

// holdRoPE adds RoPE of one row of x to the held matmul whose output x is,
// and reports whether it did. Its heads must not straddle a work-group:
// the matrices before it must be whole heads, and all RoPEs of a chain
// share their position and rope.
func (b *Backend) holdRoPE(x *tensor, heads, hd int, pos *tensor, r backend.Rope, tab *ropeTable) bool {
	return b.join(stepRoPE, func(c *chain) bool {
		m := c.matOf(x)
		if m < 0 || c.mats[m].mf != 0 || backend.Rows(c.mats[m].w) != heads*hd {
			return false
		}
		for i := range m {
			if backend.Rows(c.mats[i].w)%hd != 0 {
				return false
			}
		}
		if c.flags&mvfRoPE != 0 &&
			(c.pos != pos || c.rope != tab || c.hd != hd || c.dims != r.Dims || (c.flags&mvfNeoX != 0) != r.NeoX) {
			return false
		}
		// The group's heads must fit its local memory too.
		cc := *c
		cc.flags |= mvfRoPE
		if r.NeoX {
			cc.flags |= mvfNeoX
		}
		cc.pos, cc.rope, cc.hd, cc.dims = pos, tab, hd, r.Dims
		cc.mats[m].mf |= mfRoPE
		if _, _, _, _, _, fits := b.mvfLaunch(&cc); !fits {
			return false
		}
		*c = cc
		return true
	})
}

// holdStore adds CopySlice(dst, off, src, 0, rows) of a held matmul's whole
// output src (the KV-cache append) to it, and reports whether it did.
func (b *Backend) holdStore(dst *tensor, off int, src *tensor, srcOff, count int) bool {
	if srcOff != 0 || src.dt != dtype.F32 || (dst.dt != dtype.F32 && dst.dt != dtype.F16) || b.touches(dst) {
		return false
	}
	return b.join(stepStore, func(c *chain) bool {
		m := c.matOf(src)
		if m < 0 || c.mats[m].mf&mfStore != 0 || count != backend.Rows(c.mats[m].w) {
			return false
		}
		c.mats[m].mf |= mfStore
		if dst.dt == dtype.F16 {
			c.mats[m].mf |= mfF16
		}
		c.mats[m].cache, c.mats[m].coff = dst, off
		return true
	})
}

// holdAdd ends the one held chain with r = r + o where o is its single
// matmul's output (either operand order: float addition commutes), and
// reports whether it did.
func (b *Backend) holdAdd(r, a, o *tensor) bool {
	if a != r {
		a, o = o, a
	}
	if a != r || b.nchains != 1 || b.touches(r) {
		return false
	}
	return b.join(stepAdd, func(c *chain) bool {
		if o != c.mats[0].dst {
			return false
		}
		c.flags |= mvfAdd
		c.res = r
		return true
	})
}

// holdSiLUMul ends the one held chain with gate = silu(gate)·up where gate
// and up are its two matmuls' outputs, in that order, and reports whether
// it did.
func (b *Backend) holdSiLUMul(dst, gate, up *tensor) bool {
	if dst != gate || b.nchains != 1 {
		return false
	}
	return b.join(stepSiLUMul, func(c *chain) bool {
		if gate != c.mats[0].dst || up != c.mats[1].dst || backend.Rows(c.mats[0].w) != backend.Rows(c.mats[1].w) {
			return false
		}
		c.flags |= mvfSiLU
		if b.flavour.Wide() {
			c.flags |= mvfSiLU16
		}
		return true
	})
}

// flush launches what the backend holds, in order: a chain with matmuls as
// mvf_T, a lone norm as itself. While launches are timed, each is charged
// to its chain's name (fusedName).
func (b *Backend) flush() {
	if b.nchains == 0 {
		return
	}
	cs := b.chains
	n := b.nchains
	b.nchains = 0
	charge := b.charge
	for i := range n {
		c := &cs[i]
		if c.nmat == 0 {
			if charge != "" {
				b.charge = backend.OpNorm
			}
			b.launchRMSNorm(c.nd, c.in, c.g, 1, c.eps)
			continue
		}
		if c.norm {
			c.flags |= mvfNorm
		}
		if charge != "" {
			b.charge = b.fusedName(c)
		}
		b.launchMVF(c)
	}
	b.charge = charge
}

// fusedName is the profile name of c's launch: "fused:" and the ops it
// holds by kind, as "fused:norm+matmul×3+rope×2+copy×2".
func (b *Backend) fusedName(c *chain) string {
	var count [stepKinds]uint8
	for _, k := range c.kinds() {
		count[k]++
	}
	if s, ok := b.fusedNames[count]; ok {
		return s
	}
	var parts []string
	for k, n := range count {
		switch {
		case n == 1:
			parts = append(parts, stepNames[k])
		case n > 1:
			parts = append(parts, stepNames[k]+"×"+strconv.Itoa(int(n)))
		}
	}
	s := "fused:" + strings.Join(parts, "+")
	if b.fusedNames == nil {
		b.fusedNames = map[[stepKinds]uint8]string{}
	}
	b.fusedNames[count] = s
	return s
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

// mvfArgs are mvf_T's arguments, the fields in the order of its parameters
// (fused.cl), which TestKernelArgs holds them to by name and type.
type mvfArgs struct {
	X, G, Xn cl.Mem
	Eps      float32
	// Mats are the three matrices' w0, rb0, d0, M0, mf0, c0, co0, …
	Mats           [3]mvfMat
	K, S, J, Flags int32
	Res, Pos       cl.Mem
	Lo             int32
	Cs             cl.Mem
	Hd, Dims       int32
	Xq, Xd, Li, Ys localBytes
}

// mvfMat is one matrix's arguments to mvf_T: its weights W of rows of Rb
// bytes, output D of M rows, how they leave (Mf: mfRoPE, mfStore, mfF16),
// and the cache C they are stored to at element Co.
type mvfMat struct {
	W     cl.Mem
	Rb    uint64
	D     cl.Mem
	M, Mf int32
	C     cl.Mem
	Co    uint64
}

// launchMVF queues mvf_T for a chain.
func (b *Backend) launchMVF(c *chain) {
	k, group, lanes, J, groups, _ := b.mvfLaunch(c)
	if k == nil {
		return
	}
	K := backend.Cols(c.mats[0].w)
	a := &b.mvfArgs
	*a = mvfArgs{X: c.in.mem, G: c.in.mem, Xn: c.in.mem, Eps: c.eps, Res: c.in.mem, Pos: c.in.mem, Cs: c.in.mem}
	if c.norm {
		a.G, a.Xn = c.g.mem, c.nd.mem
	}
	for i := range a.Mats {
		m := c.mats[min(i, c.nmat-1)] // unused slots repeat the last, with no rows
		am := &a.Mats[i]
		*am = mvfMat{W: m.w.mem, Rb: uint64(m.w.bytes / max(backend.Rows(m.w), 1)), D: m.dst.mem, C: m.dst.mem, Co: uint64(m.coff)}
		if i < c.nmat {
			am.M, am.Mf = int32(backend.Rows(m.w)), m.mf
		}
		if am.Mf&mfStore != 0 {
			am.C = m.cache.mem
		}
	}
	if c.res != nil {
		a.Res = c.res.mem
	}
	if c.pos != nil {
		a.Pos, a.Cs, a.Lo = c.pos.mem, c.rope.mem, c.rope.lo
	}
	at := c.weight.ActivationType()
	xd := 4 * actFloats(at) * (K / at.BlockSize())
	_, _, _, local := b.mvfShape(c.weight, K)
	a.K, a.S, a.J, a.Flags = int32(K), int32(lanes), int32(J), c.flags
	a.Hd, a.Dims = int32(max(c.hd, 1)), int32(c.dims)
	a.Xq, a.Xd, a.Li, a.Ys = localBytes(roundUp(K, 4)), localBytes(xd), localBytes(local-roundUp(K, 4)-xd), 4
	if c.flags&mvfRoPE != 0 {
		a.Ys = localBytes(4 * J * group / lanes)
	}
	b.setArgs(k, a)
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
