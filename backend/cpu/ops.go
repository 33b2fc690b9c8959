package cpu

import (
	"fmt"
	"math"

	"github.com/glint-llm/glint/backend"
	"github.com/glint-llm/glint/dtype"
	"github.com/glint-llm/glint/internal/ggmlmath"
)

// minElemsPerTask keeps elementwise work on one thread when waking others
// would cost more than it saves.
const minElemsPerTask = 2048

// minSIMDElemsPerTask is minElemsPerTask for the C elementwise kernels,
// which are about ten times faster than the Go loops.
const minSIMDElemsPerTask = 16384

// Embedding implements backend.Backend.
func (b *Backend) Embedding(dst, table, ids backend.Tensor, n int) {
	const op = "Embedding"
	if !b.ok(op) {
		return
	}
	d := b.tensor(op, "dst", dst, dtype.F32)
	it := b.tensor(op, "ids", ids, dtype.I32)
	tt, err := b.own(op, "table", table)
	if err != nil {
		b.fail(err)
		return
	}
	if d == nil || it == nil || !b.writable(op, "dst", d) || !b.checkN(op, n, d) {
		return
	}
	dim, vocab := backend.Cols(tt), backend.Rows(tt)
	if tt.dt == dtype.I32 || backend.Cols(d) != dim || len(it.i32) < n {
		b.fail(backend.ShapeError("cpu: "+op, "table %q %v %v, dst %v, %d ids for n = %d", tt.name, tt.dt, tt.shape, d.shape, len(it.i32), n))
		return
	}
	rowBytes, _ := tt.dt.RowBytes(dim)
	for i, id := range it.i32[:n] {
		if id < 0 || int(id) >= vocab {
			b.fail(fmt.Errorf("cpu: %s: id %d at row %d is outside the vocabulary of %d", op, id, i, vocab))
			return
		}
		embedRow(tt.dt, d.f32[i*dim:(i+1)*dim], b.row(tt, int(id), rowBytes))
	}
}

// row returns row r of t (rows of rowBytes) in the file's layout: t's own
// bytes, or for an interleaved weight the row gathered into b.rowBuf (valid
// until the next call).
func (b *Backend) row(t *Tensor, r, rowBytes int) []byte {
	if !t.x8 {
		return t.data[r*rowBytes : (r+1)*rowBytes]
	}
	if len(b.rowBuf) < rowBytes {
		b.rowBuf = make([]byte, rowBytes)
	}
	rowQ4_0x8(b.rowBuf, t.data, rowBytes, r)
	return b.rowBuf[:rowBytes]
}

// RMSNorm implements backend.Backend, as llama.cpp computes it (rmsNormRows).
func (b *Backend) RMSNorm(dst, x, w backend.Tensor, n int, eps float32) {
	const op = "RMSNorm"
	if !b.ok(op) {
		return
	}
	d := b.tensor(op, "dst", dst, dtype.F32)
	xt := b.tensor(op, "x", x, dtype.F32)
	wt := b.tensor(op, "w", w, dtype.F32)
	if d == nil || xt == nil || wt == nil || !b.writable(op, "dst", d) || !b.checkN(op, n, d, xt) {
		return
	}
	cols, k := backend.Cols(xt), len(wt.f32)
	if backend.Cols(d) != cols || k == 0 || cols%k != 0 {
		b.fail(backend.ShapeError("cpu: "+op, "x %v, w %v, dst %v", xt.shape, wt.shape, d.shape))
		return
	}
	if n == 0 {
		return
	}
	// A w shorter than a row normalises each of its runs: rows of k.
	rows := n * (cols / k)
	t := &b.pool.task
	*t = task{kind: kRMSNorm, total: rows, grain: max(1, minElemsPerTask/k), dst: d.f32, x: xt.f32, y: wt.f32, k: k, eps: eps}
	b.pool.run()
}

func rmsNormRows(t *task, lo, hi int) {
	k := t.k
	// ggml's rms_norm: float squares summed in float64 in order (its
	// rounding, rare as it is, can move the float32 mean), the mean and
	// 1/sqrt in float32, then x·scale and (ggml_mul) ·w, each rounded. A
	// row's sum is one chain of dependent adds, so four rows are summed
	// side by side, four chains in flight.
	i := lo
	for ; i+4 <= hi; i += 4 {
		x0, x1, x2, x3 := t.x[i*k:(i+1)*k], t.x[(i+1)*k:(i+2)*k], t.x[(i+2)*k:(i+3)*k], t.x[(i+3)*k:(i+4)*k]
		var s0, s1, s2, s3 float64
		for j := range x0 {
			v0, v1, v2, v3 := x0[j], x1[j], x2[j], x3[j]
			s0 += float64(v0 * v0)
			s1 += float64(v1 * v1)
			s2 += float64(v2 * v2)
			s3 += float64(v3 * v3)
		}
		rmsScale(t, i, s0)
		rmsScale(t, i+1, s1)
		rmsScale(t, i+2, s2)
		rmsScale(t, i+3, s3)
	}
	for ; i < hi; i++ {
		var sum float64
		for _, v := range t.x[i*k : (i+1)*k] {
			sum += float64(v * v)
		}
		rmsScale(t, i, sum)
	}
}

// rmsScale writes row i of an RMSNorm whose squares sum to sum.
func rmsScale(t *task, i int, sum float64) {
	k := t.k
	x, y, w := t.x[i*k:(i+1)*k], t.dst[i*k:(i+1)*k], t.y[:k]
	mean := float32(sum / float64(k))
	s := 1 / float32(math.Sqrt(float64(mean+t.eps)))
	for j, v := range x {
		y[j] = (v * s) * w[j]
	}
}

// RoPE implements backend.Backend, with llama.cpp's float32 arithmetic.
func (b *Backend) RoPE(x backend.Tensor, n, heads, headDim int, pos backend.Tensor, r backend.Rope) {
	const op = "RoPE"
	if !b.ok(op) {
		return
	}
	xt := b.tensor(op, "x", x, dtype.F32)
	pt := b.tensor(op, "pos", pos, dtype.I32)
	if xt == nil || pt == nil || !b.writable(op, "x", xt) || !b.checkN(op, n, xt) {
		return
	}
	freqScale, mscale, scalesOK := r.Scales()
	if heads <= 0 || headDim <= 0 || backend.Cols(xt) != heads*headDim || len(pt.i32) < n ||
		r.Dims <= 0 || r.Dims%2 != 0 || r.Dims > headDim || !(r.Theta > 0) || !scalesOK {
		b.fail(backend.ShapeError("cpu: "+op, "x %v with %d heads of %d, %d positions for n = %d, rope dims %d theta %g, scales %g %g",
			xt.shape, heads, headDim, len(pt.i32), n, r.Dims, r.Theta, r.FreqScale, r.AttnFactor))
		return
	}
	half := r.Dims / 2
	var freqs []float32
	if r.Freqs != nil {
		ft := b.tensor(op, "Freqs", r.Freqs, dtype.F32)
		if ft == nil {
			return
		}
		if len(ft.f32) != half {
			b.fail(backend.ShapeError("cpu: "+op, "Freqs %v, want [%d]", ft.shape, half))
			return
		}
		freqs = ft.f32
	}
	if len(b.ropeCS) < 2*half {
		b.ropeCS = make([]float32, 2*half)
	}
	cs := b.ropeCS[:2*half]
	// The angles, cos and sin are ggml's (ggmlmath.RoPECosSin), and the
	// rotation two fused multiply-adds of a rounded product, as gcc
	// contracts ggml's x0·cos − x1·sin and x0·sin + x1·cos (checked against
	// the peer's rope output): keys rounded into an f16 cache then match
	// llama.cpp's bit for bit.
	thetaScale := ggmlmath.Powf(r.Theta, float32(-2)/float32(r.Dims))
	cols := heads * headDim
	if b.simd > simdOff {
		simdRoPE(xt.f32, n, cols, heads, headDim, pt.i32[:n], r.Dims, thetaScale, freqs, freqScale, mscale, r.NeoX, cs)
		return
	}
	for tok, p := range pt.i32[:n] {
		ggmlmath.RoPECosSin(cs, p, thetaScale, freqs, freqScale, mscale)

		row := xt.f32[tok*cols : (tok+1)*cols]
		for h := range heads {
			v := row[h*headDim : h*headDim+r.Dims]
			for i := range half {
				// NeoX pairs element i with i+half; GGUF llama pairs 2i, 2i+1.
				a, bi := 2*i, 2*i+1
				if r.NeoX {
					a, bi = i, i+half
				}
				c, s := cs[2*i], cs[2*i+1]
				x0, x1 := v[a], v[bi]
				v[a] = fmaf(x0, c, -(x1 * s))
				v[bi] = fmaf(x0, s, x1*c)
			}
		}
	}
}

// SiLUMul implements backend.Backend.
func (b *Backend) SiLUMul(dst, gate, up backend.Tensor, n int) {
	d, g, u, cols := b.elementwise("SiLUMul", "gate", "up", dst, gate, up, n)
	if d == nil || n == 0 {
		return
	}
	t := &b.pool.task
	total := n * cols
	// The C kernel does a decode step's 8192 elements in ~2.5 µs, less than
	// waking a second thread costs (measured: 2.5 µs alone, 5 µs on two).
	grain := max(minElemsPerTask, b.grainFor(total))
	if b.simd > simdOff {
		grain = max(minSIMDElemsPerTask, grain)
	}
	*t = task{kind: kSiLUMul, total: total, grain: grain, dst: d.f32, x: g.f32, y: u.f32, k: cols, simd: b.simd, flavour: b.flavour}
	b.pool.run()
}

// siluMulRange computes elements lo…hi-1 of SiLUMul as ggml_vec_silu_f32
// does in the llama.cpp build glint follows (flavor.go), followed by the
// product with up.
func siluMulRange(t *task, lo, hi int) {
	if t.flavour.Wide() {
		siluMulRows(t, lo, hi, 16, siluMul16)
		return
	}
	siluMulRows(t, lo, hi, 8, siluMul8)
}

// siluMulRows is elements lo…hi-1 of t's rows of t.k as
// ggml_vec_silu_f32 of a build whose vectors hold width floats computes
// them, then × up: vec (its ggml_v_silu) over each row's first
// width·⌊cols/width⌋ elements, ggml_silu_f32 with libm's expf over the
// rest.
func siluMulRows(t *task, lo, hi, width int, vec func(l simdLevel, d, g, u []float32)) {
	cols := t.k
	for lo < hi {
		rowEnd := (lo/cols + 1) * cols
		if vecEnd := min(hi, rowEnd-cols%width); lo < vecEnd {
			vec(t.simd, t.dst[lo:vecEnd], t.x[lo:vecEnd], t.y[lo:vecEnd])
			lo = vecEnd
		}
		for ; lo < min(hi, rowEnd); lo++ {
			x := t.x[lo]
			t.dst[lo] = x / (1 + ggmlmath.Expf(-x)) * t.y[lo]
		}
	}
}

// siluMul8 is ggml's AVX2 ggml_v_silu followed by the product with up: the
// C kernel at a SIMD level (ops.c, the same operations), else siluMulGo.
func siluMul8(l simdLevel, d, g, u []float32) {
	if l > simdOff {
		simdSiLUMul(l, d, g, u)
		return
	}
	siluMulGo(d, g, u)
}

// siluMulGo is ggml's silu (x/(1+e^−x), with its vectorised exp) followed by
// the multiplication by up, in float32.
func siluMulGo(d, g, u []float32) {
	for i, v := range g {
		s := v / (1 + expf(-v))
		d[i] = s * u[i]
	}
}

// Add implements backend.Backend.
func (b *Backend) Add(dst, a, bt backend.Tensor, n int) {
	d, x, y, cols := b.elementwise("Add", "a", "b", dst, a, bt, n)
	if d == nil {
		return
	}
	m := n * cols
	xs, ys, ds := x.f32[:m], y.f32[:m], d.f32[:m]
	if b.simd > simdOff {
		simdAdd(ds, xs, ys)
		return
	}
	addGo(ds, xs, ys)
}

// addGo is d[i] = x[i] + y[i], the portable path of Add.
func addGo(d, x, y []float32) {
	for i := range d {
		d[i] = x[i] + y[i]
	}
}

// CopySlice implements backend.Backend.
func (b *Backend) CopySlice(dst backend.Tensor, dstOff int, src backend.Tensor, srcOff, count int) {
	const op = "CopySlice"
	if !b.ok(op) {
		return
	}
	d, s := b.ownPair(op, dst, src)
	if d == nil {
		return
	}
	if !b.writable(op, "dst", d) {
		return
	}
	dn, sn := backend.Elems(d.shape), backend.Elems(s.shape)
	toHalf := d.dt == dtype.F16 && s.dt == dtype.F32
	fromHalf := d.dt == dtype.F32 && s.dt == dtype.F16
	bad := count < 0 || dstOff < 0 || srcOff < 0 || count > dn-dstOff || count > sn-srcOff
	if !bad && d.dt != s.dt && (cacheType(d.dt) || cacheType(s.dt)) {
		if !b.copyCache(d, dstOff, s, srcOff, count) {
			b.fail(backend.ShapeError("cpu: "+op, "%d elements from %v %v at %d to %v %v at %d: want F32 to or from a cache type, in whole blocks", count, s.dt, s.shape, srcOff, d.dt, d.shape, dstOff))
		}
		return
	}
	if d.dt != s.dt && !toHalf && !fromHalf || d.dt.Quantized() || bad {
		b.fail(backend.ShapeError("cpu: "+op, "%d elements from %v %v at %d to %v %v at %d", count, s.dt, s.shape, srcOff, d.dt, d.shape, dstOff))
		return
	}
	if toHalf {
		// The f16 KV cache: each value rounds to nearest even, as ggml's
		// F32→F16 copy (F16C) does.
		h := halfs(d)[dstOff : dstOff+count]
		if b.simd > simdOff {
			simdToHalf(h, s.f32[srcOff:srcOff+count])
			return
		}
		for i, v := range s.f32[srcOff : srcOff+count] {
			h[i] = dtype.F32ToF16(v)
		}
		return
	}
	if fromHalf {
		// An f16 KV cache read back for a K-shift: widening is exact.
		for i, v := range halfs(s)[srcOff : srcOff+count] {
			d.f32[dstOff+i] = dtype.F16ToF32(v)
		}
		return
	}
	es := d.dt.BlockBytes()
	copy(d.data[dstOff*es:(dstOff+count)*es], s.data[srcOff*es:(srcOff+count)*es])
}

// Argmax implements backend.Backend.
func (b *Backend) Argmax(dst, x backend.Tensor, n int) {
	const op = "Argmax"
	if !b.ok(op) {
		return
	}
	d := b.tensor(op, "dst", dst, dtype.I32)
	xt := b.tensor(op, "x", x, dtype.F32)
	if d == nil || xt == nil || !b.writable(op, "dst", d) || !b.checkN(op, n, xt) {
		return
	}
	if len(d.i32) < n {
		b.fail(backend.ShapeError("cpu: "+op, "dst %v holds fewer than n = %d indices", d.shape, n))
		return
	}
	cols := backend.Cols(xt)
	for i := range n {
		d.i32[i] = int32(argmax(xt.f32[i*cols : (i+1)*cols]))
	}
}

// argmax is the index of the first largest value of row (NaNs never
// larger; 0 when row[0] is NaN). Four running maxima, then a scan for
// the first index that holds their maximum, take a vocabulary-sized row in
// a fraction of one compare-and-branch chain's time.
func argmax(row []float32) int {
	if len(row) == 0 {
		return 0
	}
	m0 := row[0]
	m1, m2, m3 := m0, m0, m0
	j := 0
	for ; j+4 <= len(row); j += 4 {
		v := row[j : j+4 : j+4]
		if v[0] > m0 {
			m0 = v[0]
		}
		if v[1] > m1 {
			m1 = v[1]
		}
		if v[2] > m2 {
			m2 = v[2]
		}
		if v[3] > m3 {
			m3 = v[3]
		}
	}
	for ; j < len(row); j++ {
		if row[j] > m0 {
			m0 = row[j]
		}
	}
	if m1 > m0 {
		m0 = m1
	}
	if m2 > m0 {
		m0 = m2
	}
	if m3 > m0 {
		m0 = m3
	}
	for j, v := range row {
		if v == m0 {
			return j
		}
	}
	return 0
}

// elementwise checks the arguments of an op dst = f(x, y) over n rows of
// F32 tensors of one row length, and returns them (d nil after a failure).
func (b *Backend) elementwise(op, xName, yName string, dst, x, y backend.Tensor, n int) (d, xt, yt *Tensor, cols int) {
	if !b.ok(op) {
		return nil, nil, nil, 0
	}
	d = b.tensor(op, "dst", dst, dtype.F32)
	xt = b.tensor(op, xName, x, dtype.F32)
	yt = b.tensor(op, yName, y, dtype.F32)
	if d == nil || xt == nil || yt == nil || !b.writable(op, "dst", d) || !b.checkN(op, n, d, xt, yt) {
		return nil, nil, nil, 0
	}
	cols = backend.Cols(d)
	if backend.Cols(xt) != cols || backend.Cols(yt) != cols {
		b.fail(backend.ShapeError("cpu: "+op, "dst %v, %s %v, %s %v", d.shape, xName, xt.shape, yName, yt.shape))
		return nil, nil, nil, 0
	}
	return d, xt, yt, cols
}

// ownPair resolves the dst and src tensors of a copy, recording the failure
// (and returning nil) when either is not this backend's.
func (b *Backend) ownPair(op string, dst, src backend.Tensor) (d, s *Tensor) {
	d, err := b.own(op, "dst", dst)
	if err == nil {
		s, err = b.own(op, "src", src)
	}
	if err != nil {
		b.fail(err)
		return nil, nil
	}
	return d, s
}
