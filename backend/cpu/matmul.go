package cpu

import (
	"github.com/glint-llm/glint/backend"
	"github.com/glint-llm/glint/dtype"
)

const (
	// tokenTile tokens share one pass over a weight row in prefill: each
	// dequantised chunk is used tokenTile times while it sits in L1, and
	// the tile's activations (tokenTile × chunk floats) stay in L2.
	tokenTile = 32
	// chunkElems is the k-chunk the portable float path dequantises at
	// once: a multiple of every floatSum's lanes, so that a chunk starts
	// at lane 0.
	chunkElems = 256
	// rowTile is the number of weight rows the quantised SIMD kernels
	// process together (sharing each activation block), so work is split
	// in multiples of it.
	rowTile = 4
	// decodeChunk is the bytes of weight rows a thread claims at a time in
	// decode (see MatMulTransposed).
	decodeChunk = 128 << 10
	// decodeTokens is the most tokens a matmul chunks as a decode: one
	// sequence's step, or a few sequences decoding together, whose extra
	// tokens cost arithmetic on the weights' one pass. Their chunks also go
	// one cgo call each (simdRows). Up to 8 tokens the weights' stream, not
	// the arithmetic, still sets the time, so decode's small chunks, which
	// keep the threads reading neighbouring memory, beat prefill's larger
	// ones (generate batched-bench, BenchmarkKernelsDRAM).
	decodeTokens = 8
	// prefillChunkMACs is the multiply-adds a thread claims at a time in a
	// matmul of several tokens, a fraction of a millisecond on one core: a
	// matmul ends when its last chunk does, so the other threads wait up to
	// a chunk for the slowest. Larger chunks, four per thread (1024 rows of
	// a 128-token 8192×2048), leave two threads short of two separate
	// processes' sum.
	prefillChunkMACs = 1 << 24
)

// MatMulTransposed implements backend.Backend.
func (b *Backend) MatMulTransposed(dst, x, w backend.Tensor, n int) {
	b.matMul("MatMulTransposed", dst, x, w, n, false)
}

// MatMulDecode implements backend.Backend: the float weights sum in a lone
// row's order (FloatOrder of one token), and IQ4_NL, whose decode kernel
// alone alternates two accumulators, takes the portable kernels, which
// choose the arithmetic per call rather than by the token count.
func (b *Backend) MatMulDecode(dst, x, w backend.Tensor, n int) {
	b.matMul("MatMulDecode", dst, x, w, n, true)
}

func (b *Backend) matMul(op string, dst, x, w backend.Tensor, n int, decode bool) {
	if !b.ok(op) {
		return
	}
	xt := b.tensor(op, "x", x, dtype.F32)
	d := b.tensor(op, "dst", dst, dtype.F32)
	wt, err := b.own(op, "w", w)
	if err != nil {
		b.fail(err)
		return
	}
	if d == nil || xt == nil || !b.checkN(op, n, d, xt) {
		return
	}
	if wt.dt == dtype.I32 {
		b.fail(backend.ShapeError("cpu: "+op, "weight %q is I32", wt.name))
		return
	}
	k, m := backend.Cols(wt), backend.Rows(wt)
	rowBytes, _ := wt.dt.RowBytes(k)
	if backend.Cols(xt) != k || backend.Cols(d) != m {
		b.fail(backend.ShapeError("cpu: "+op, "x %v · w %q %v → dst %v: want x [_, %d] and dst [_, %d]",
			xt.shape, wt.name, wt.shape, d.shape, k, m))
		return
	}
	// x is rounded to the activation type (quantised for quantised weights,
	// to F16 or BF16 for those) before dst is marked written (writable):
	// when dst is x, that write must invalidate the rounded copy.
	var a *acts
	xf := xt.f32
	var xh []uint16
	if at := wt.dt.ActivationType(); at != dtype.F32 && n > 0 {
		a = b.quantize(xt, wt.dt, n, k)
		if !wt.dt.Quantized() {
			// F16 and BF16 run the float kernels on the rounded rows.
			if len(a.h) >= n*k {
				xh = a.h[:n*k]
			}
			xf, a = a.f, nil
		}
	}
	if !b.writable(op, "dst", d) || n == 0 {
		return
	}
	t := &b.pool.task
	*t = task{kind: kMatMul, total: m, dst: d.f32, x: xf, xh: xh, w: wt.data, y: wt.f32, wt: wt.dt, n: n, k: k, m: m, act: a,
		sum: b.flavour.FloatOrder(wt.dt, orderRows(n, decode), k, m), x8: wt.x8, decode: decode}
	if b.simd > simdOff && simdType(wt.dt) && !(decode && n > 1 && wt.dt == dtype.IQ4_NL) {
		t.simd = b.simd
	}
	// At least four chunks per thread even out threads slowed down by others
	// on the machine; the quantised SIMD kernels work on tiles of rowTile
	// rows, so chunks are whole tiles, and float prefill chunks are whole
	// tiles of tinyBLAS's 4 rows (and 32-row panels for the cache).
	t.grain = b.grainFor(m)
	if n <= decodeTokens {
		// Decode streams the weight once, at the speed memory delivers it.
		// Threads claim chunks of about decodeChunk bytes in turn, as
		// llama.cpp's threads take 64 rows at a time, so that they read
		// neighbouring memory and a thread woken late simply takes fewer
		// chunks. One contiguous share per thread (the caller's larger by
		// the helpers' wake-up time) streams slower, for F16, Q8_0 and
		// Q4_0 alike: the last thread to finish sets the time.
		t.grain = max(1, min(decodeChunk/rowBytes, (m+4*b.threads-1)/(4*b.threads)))
	} else {
		t.grain = max(1, min(t.grain, prefillChunkMACs/max(1, n*k)))
	}
	switch {
	case t.simd > simdOff && a != nil:
		tile := rowTile
		if t.x8 {
			tile = q4x8Rows // a claim takes whole interleaved groups
		}
		t.grain = (t.grain + tile - 1) / tile * tile
	case t.simd > simdOff && n > 1:
		t.grain = (t.grain + 31) / 32 * 32
	}
	b.pool.run()
}

// quantize rounds the first n rows of x to the activation type of weight
// type wt in b.act, unless b.act already holds exactly that (the same tensor,
// unchanged since, rounded the same way).
func (b *Backend) quantize(x *Tensor, wt dtype.Type, n, k int) *acts {
	key := actKey{x: x, version: x.version, at: wt.ActivationType(), off: actOffset(wt), n: n, k: k}
	if b.actKey == key {
		return &b.act
	}
	// Only the SIMD rounding (simdQuantize) stores F16 bits, and only the
	// SIMD tiles read them; a backend's level is fixed for its life.
	b.act.grow(key.at, n, k, b.simd > simdOff, b.flavour.BF16())
	b.act.n = n
	t := &b.pool.task
	*t = task{kind: kQuantize, total: n, grain: max(1, minElemsPerTask/k), x: x.f32, k: k, act: &b.act, at: key.at, off: key.off}
	if b.simd > simdOff {
		t.simd = b.simd
	}
	if n == 1 {
		quantizeRows(t, 0, 1) // not worth waking a thread
	} else {
		b.pool.run()
	}
	b.actKey = key
	b.quantized++
	return &b.act
}

func quantizeRows(t *task, lo, hi int) {
	if t.simd > simdOff {
		simdQuantize(t.at, t.off, t.act, t.x, t.k, lo, hi)
	} else {
		quantizeRowsGo(t.at, t.off, t.act, t.x, t.k, lo, hi)
	}
}

// matMulRows computes output columns lo…hi-1 for every token, for the
// matmuls whose chunks go one by one through Go (see simdRows): the
// portable kernels. The portable path with float weights
// dequantises a chunk of a row once and adds it into the lanes (floatSum)
// of a tile of tokens.
func matMulRows(t *task, lo, hi int) {
	k, m, n := t.k, t.m, t.n
	rowBytes, _ := t.wt.RowBytes(k)
	if t.act != nil {
		for o := lo; o < hi; o++ {
			row := t.w[o*rowBytes : (o+1)*rowBytes]
			for i := range n {
				t.dst[i*m+o] = dotQ(t.wt, t.act, i, k, row, m, n > 1 && !t.decode)
			}
		}
		return
	}
	var buf [chunkElems]float32
	var acc [tokenTile][64]float32
	lanes := t.sum.Lanes(t.wt)
	np := k &^ (lanes - 1) // the elements in whole steps; the rest are finish's
	fused := t.wt == dtype.F32
	elemBytes := t.wt.BlockBytes() // float types: bytes per element
	for o := lo; o < hi; o++ {
		row := t.w[o*rowBytes : (o+1)*rowBytes]
		for t0 := 0; t0 < n; t0 += tokenTile {
			nt := min(tokenTile, n-t0)
			clear(acc[:nt])
			for c := 0; c < k; c += chunkElems {
				cl := min(chunkElems, k-c)
				var wc []float32
				if t.wt == dtype.F32 {
					wc = t.y[o*k+c : o*k+c+cl]
				} else {
					wc = buf[:cl]
					dequant(t.wt, wc, row[c*elemBytes:])
				}
				// chunkElems is a multiple of every lane count, so a chunk
				// starts at lane 0.
				whole := max(0, min(cl, np-c))
				for i := range nt {
					xs := t.x[(t0+i)*k+c:]
					switch {
					case whole == 0:
					case t.sum.Paired():
						addPairs(&acc[i], xs[:whole], wc, lanes)
					default:
						addLanes(&acc[i], xs[:whole], wc, lanes, fused)
					}
					if c+cl == k {
						t.dst[(t0+i)*m+o] = finishSum(t.sum, t.wt, &acc[i], xs[whole:cl], wc[whole:cl])
					}
				}
			}
			if k == 0 {
				for i := range nt {
					t.dst[(t0+i)*m+o] = 0
				}
			}
		}
	}
}

// orderRows is the token count whose float order a matmul of n rows
// takes: one for a decode's (MatMulDecode).
func orderRows(n int, decode bool) int {
	if decode {
		return 1
	}
	return n
}
