package kvcache_test

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/glint-llm/glint/backend"
	"github.com/glint-llm/glint/backend/cpu"
	"github.com/glint-llm/glint/dtype"
	"github.com/glint-llm/glint/kvcache"
)

const kvh, hd = 2, 4 // every test cache's K/V row is 2 heads of 4

func newCache(t *testing.T, b backend.Backend, o kvcache.Options) *kvcache.Cache {
	t.Helper()
	if o.KVHeads == 0 {
		o.KVHeads, o.HeadDim = kvh, hd
	}
	if o.K == 0 {
		o.K, o.V = dtype.F32, dtype.F32
	}
	c, err := kvcache.New(b, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Free(b) })
	return c
}

// ParseType takes llama.cpp's names and refuses others with a clear error;
// New refuses types, layouts and sizes it cannot hold.
func TestTypes(t *testing.T) {
	for _, c := range []struct {
		in   string
		want dtype.Type
		ok   bool
	}{{"", dtype.F16, true}, {"f16", dtype.F16, true}, {"F32", dtype.F32, true}, {"q8_0", dtype.Q8_0, true}, {"bf16", dtype.BF16, true},
		{"Q4_0", dtype.Q4_0, true}, {"q4_1", dtype.Q4_1, true}, {"q5_0", dtype.Q5_0, true}, {"q5_1", dtype.Q5_1, true},
		{"iq4_nl", dtype.IQ4_NL, true}, {"q6_k", 0, false}, {"f64", 0, false}} {
		got, err := kvcache.ParseType(c.in)
		if (err == nil) != c.ok || c.ok && got != c.want {
			t.Errorf("ParseType(%q) = %v, %v; want %v, ok %v", c.in, got, err, c.want, c.ok)
		}
	}
	b := cpu.New(1)
	defer b.Close()
	for _, o := range []kvcache.Options{
		{Layers: 1, Cells: 4, Batch: 1, KVHeads: 1, HeadDim: 8, K: dtype.Q8_0, V: dtype.F16},
		{Layers: 1, Cells: 4, Batch: 1, KVHeads: 1, HeadDim: 48, K: dtype.F16, V: dtype.IQ4_NL},
		{Layers: 1, Cells: 4, Batch: 1, KVHeads: 1, HeadDim: 32, K: dtype.Q6_K, V: dtype.F16},
		{Layers: 1, Cells: 1 << 20, Batch: 1, KVHeads: 8, HeadDim: 64, K: dtype.F16, V: dtype.F16, MaxBytes: 1 << 30},
		{Layers: 1, Cells: 4, Batch: 1, KVHeads: 1, HeadDim: 8, K: dtype.F16, V: dtype.F16, Seqs: 65},
		{Layers: 1, Cells: 4, Batch: 1, KVHeads: 1, HeadDim: 8, K: dtype.F16, V: dtype.F16, Seqs: 5, Layout: kvcache.PerStream},
		{Layers: 1, Cells: 4, Batch: 0, KVHeads: 1, HeadDim: 8, K: dtype.F16, V: dtype.F16},
	} {
		if c, err := kvcache.New(b, o); err == nil {
			c.Free(b)
			t.Errorf("New(%+v) accepted", o)
		}
	}
}

// rowsOf fills n K and V rows: K row i holds base+i+0.3+element/8 (not an
// f16 value, so an f16 cache must hold its rounding), V its negation.
func rowsOf(t *testing.T, b backend.Backend, k, v backend.Tensor, base float32, n int) {
	t.Helper()
	row := kvh * hd
	x := make([]float32, n*row)
	for i := range x {
		x[i] = base + float32(i/row) + 0.3 + float32(i%row)/8
	}
	if err := b.WriteF32(k, 0, x); err != nil {
		t.Fatal(err)
	}
	for i := range x {
		x[i] = -x[i]
	}
	if err := b.WriteF32(v, 0, x); err != nil {
		t.Fatal(err)
	}
}

// A single sequence fills cell j with position j, as llama.cpp does: Store
// writes the batch's rows there in [cells, kvHeads, headDim] order,
// rounding into an F16 cache; the rows see the cells in use, [0, last).
func TestStoreLayout(t *testing.T) {
	for _, ct := range []dtype.Type{dtype.F32, dtype.F16} {
		t.Run(ct.String(), func(t *testing.T) {
			b := cpu.New(1)
			defer b.Close()
			const layers, cells = 2, 5
			c := newCache(t, b, kvcache.Options{Layers: layers, Cells: cells, Batch: 3, K: ct, V: ct})
			if want := int64(layers * cells * kvh * hd * 2 * ct.BlockBytes()); c.Bytes() != want {
				t.Errorf("Bytes %d, want %d", c.Bytes(), want)
			}
			row := kvh * hd
			k, _ := b.Alloc(dtype.F32, 3, row)
			v, _ := b.Alloc(dtype.F32, 3, row)
			want := make([]float32, cells*row)
			p := 0
			for _, n := range []int{2, 3} {
				pos, seq := make([]int32, n), make([]int32, n)
				for i := range pos {
					pos[i] = int32(p + i)
				}
				if err := c.Begin(b, pos, seq); err != nil {
					t.Fatal(err)
				}
				checkView(t, b, c, pos, seq, 0, p+n)
				rowsOf(t, b, k, v, float32(100*n), n)
				c.Store(b, 1, k, v, n)
				for i := range n * row {
					want[p*row+i] = float32(100*n) + float32(i/row) + 0.3 + float32(i%row)/8
				}
				p += n
			}
			if ct == dtype.F16 {
				dtype.RoundActivations(dtype.F16, want, want)
			}
			kc, vc := c.Layer(1)
			gotK, gotV := make([]float32, cells*row), make([]float32, cells*row)
			if err := b.ReadF32(kc, 0, gotK); err != nil {
				t.Fatal(err)
			}
			if err := b.ReadF32(vc, 0, gotV); err != nil {
				t.Fatal(err)
			}
			for i := range want {
				if gotK[i] != want[i] || gotV[i] != -want[i] {
					t.Fatalf("element %d: k %v v %v, want ±%v", i, gotK[i], gotV[i], want[i])
				}
			}
			if err := c.Begin(b, []int32{5}, []int32{0}); !errors.Is(err, kvcache.ErrFull) {
				t.Fatalf("a token past the cells: %v, want ErrFull", err)
			}
			if err := b.Sync(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// checkView reads the begun batch's view back: row i is (pos, seq, lo, hi)
// with the range given, and the cell table equals the cache's cells.
func checkView(t *testing.T, b backend.Backend, c *kvcache.Cache, pos, seq []int32, lo, hi int) {
	t.Helper()
	v := c.View()
	rows := make([]int32, 4*len(pos))
	if err := b.ReadI32(v.Rows, 0, rows); err != nil {
		t.Fatal(err)
	}
	for i := range pos {
		if got, want := rows[4*i:4*i+4], []int32{pos[i], seq[i], int32(lo), int32(hi)}; lo >= 0 && !slices.Equal(got, want) {
			t.Errorf("row %d = %v, want %v", i, got, want)
		}
		if int(rows[4*i+2]) < v.Lo || int(rows[4*i+3]) > v.Hi {
			t.Errorf("row %d range [%d, %d) outside the view [%d, %d)", i, rows[4*i+2], rows[4*i+3], v.Lo, v.Hi)
		}
	}
	cells := make([]int32, 3*c.Cells)
	if err := b.ReadI32(v.Cells, 0, cells); err != nil {
		t.Fatal(err)
	}
	for j := range c.Cells {
		p, s := c.Cell(j)
		if got, want := cells[3*j:3*j+3], []int32{p, int32(uint32(s)), int32(uint32(s >> 32))}; !slices.Equal(got, want) {
			t.Fatalf("cell %d on the backend %v, want %v", j, got, want)
		}
	}
}

// model is the naive reference of the cache's contents: per sequence, the
// tokens it holds, each a position and the value its K row was stored
// with (which identifies the cell its data came from).
type model map[int]map[int32]float32

// seqTokens reads what the cache says each sequence holds: positions and
// the first K value of the cell holding them.
func seqTokens(t *testing.T, b backend.Backend, c *kvcache.Cache) model {
	t.Helper()
	kc, _ := c.Layer(0)
	k := make([]float32, c.Cells*kvh*hd)
	if err := b.ReadF32(kc, 0, k); err != nil {
		t.Fatal(err)
	}
	got := model{}
	for j := range c.Cells {
		p, s := c.Cell(j)
		if (p < 0) != (s == 0) {
			t.Fatalf("cell %d: position %d with sequences %b", j, p, s)
		}
		for seq := range c.Seqs {
			if s&(1<<uint(seq)) == 0 {
				continue
			}
			if c.Layout == kvcache.PerStream && j/(c.Cells/c.Seqs) != seq {
				t.Fatalf("cell %d of stream %d holds sequence %d", j, j/(c.Cells/c.Seqs), seq)
			}
			if got[seq] == nil {
				got[seq] = map[int32]float32{}
			}
			if _, dup := got[seq][p]; dup {
				t.Fatalf("sequence %d holds position %d twice", seq, p)
			}
			got[seq][p] = k[j*kvh*hd]
		}
	}
	return got
}

// Random batches and sequence operations on both layouts agree with the
// naive model after every step: each sequence holds exactly the positions
// (and the data) the operations say, a per-stream cache keeps each in its
// stream, shared cells carry several sequences, the backend's cell table
// mirrors the cache and every row's range holds the cells its sequence
// sees. Moving a shared prefix leaves the other sequences' positions alone.
func TestSeqOpsAgainstModel(t *testing.T) {
	for _, layout := range []kvcache.Layout{kvcache.Unified, kvcache.PerStream} {
		t.Run(layout.String(), func(t *testing.T) {
			const seqs, cells, batch = 4, 64, 6
			b := cpu.New(1)
			defer b.Close()
			c := newCache(t, b, kvcache.Options{Layers: 1, Cells: cells, Batch: batch, Seqs: seqs, Layout: layout})
			k, _ := b.Alloc(dtype.F32, batch, kvh*hd)
			v, _ := b.Alloc(dtype.F32, batch, kvh*hd)
			want := model{}
			next := make([]int32, seqs) // each sequence's next position
			rng := rand.New(rand.NewPCG(1, 2))
			val := float32(1)
			for step := range 400 {
				what := ""
				switch op := rng.IntN(10); {
				case op < 5: // a batch of runs of tokens of random sequences
					var pos, seq []int32
					n := 1 + rng.IntN(batch)
					for len(pos) < n {
						s := int32(rng.IntN(seqs))
						for r := 1 + rng.IntN(3); r > 0 && len(pos) < n; r-- {
							pos, seq = append(pos, next[s]), append(seq, s)
							next[s]++
						}
					}
					x := make([]float32, n*kvh*hd)
					for i := range n {
						for e := range kvh * hd {
							x[i*kvh*hd+e] = val + float32(i)
						}
					}
					err := c.Begin(b, pos, seq)
					if errors.Is(err, kvcache.ErrFull) {
						for i := range pos {
							next[seq[i]]--
						}
						continue
					}
					if err != nil {
						t.Fatal(err)
					}
					checkView(t, b, c, pos, seq, -1, 0)
					b.WriteF32(k, 0, x)
					c.Store(b, 0, k, v, n)
					for i := range n {
						if want[int(seq[i])] == nil {
							want[int(seq[i])] = map[int32]float32{}
						}
						want[int(seq[i])][pos[i]] = val + float32(i)
					}
					val += 100
					what = fmt.Sprintf("batch %v of %v", pos, seq)
				case op < 7:
					s, p0 := rng.IntN(seqs), int(rng.Int32N(next[rng.IntN(seqs)]+1))
					p1 := -1
					if rng.IntN(2) == 0 {
						p1 = p0 + rng.IntN(8)
					}
					if rng.IntN(10) == 0 {
						s = -1
					}
					if err := c.SeqRemove(s, p0, p1); err != nil {
						t.Fatal(err)
					}
					for q, toks := range want {
						if s >= 0 && q != s {
							continue
						}
						for p := range toks {
							if int(p) >= p0 && (p1 < 0 || int(p) < p1) {
								delete(toks, p)
							}
						}
					}
					what = fmt.Sprintf("remove %d [%d, %d)", s, p0, p1)
				case op < 8:
					src, dst := rng.IntN(seqs), rng.IntN(seqs)
					if src != dst { // else two cells of dst could hold one position
						if err := c.SeqRemove(dst, -1, -1); err != nil {
							t.Fatal(err)
						}
						want[dst] = map[int32]float32{}
					}
					if err := c.SeqCopy(b, src, dst, -1, -1); err != nil {
						t.Fatal(err)
					}
					if src != dst {
						for p, x := range want[src] {
							if want[dst] == nil {
								want[dst] = map[int32]float32{}
							}
							want[dst][p] = x
						}
						next[dst] = max(next[dst], next[src])
					}
					what = fmt.Sprintf("copy %d to %d", src, dst)
				case op < 9:
					s, p0, d := rng.IntN(seqs), rng.IntN(int(next[0])+2), rng.IntN(9)-6
					// As llama-cli does, make room first: positions must stay unique.
					if err := c.SeqRemove(s, p0+d, p0); err != nil {
						t.Fatal(err)
					}
					for p := range want[s] {
						if int(p) >= p0+d && int(p) < p0 {
							delete(want[s], p)
						}
					}
					err := c.SeqShift(b, s, p0, -1, d)
					if errors.Is(err, kvcache.ErrFull) {
						continue // no room to unshare: nothing changed
					}
					if err != nil {
						t.Fatal(err)
					}
					moved := map[int32]float32{}
					for p, x := range want[s] {
						if int(p) >= p0 {
							delete(want[s], p)
							if int(p)+d >= 0 {
								moved[p+int32(d)] = x
							}
						}
					}
					for p, x := range moved {
						want[s][p] = x
					}
					next[s] = 0
					for p := range want[s] {
						next[s] = max(next[s], p+1)
					}
					what = fmt.Sprintf("shift %d from %d by %d", s, p0, d)
				default:
					if rng.IntN(4) != 0 {
						continue
					}
					s := rng.IntN(seqs)
					if err := c.SeqKeep(s); err != nil {
						t.Fatal(err)
					}
					for q := range want {
						if q != s {
							delete(want, q)
						}
					}
					what = fmt.Sprintf("keep %d", s)
				}
				got := seqTokens(t, b, c)
				for s := range seqs {
					if len(got[s]) != len(want[s]) {
						t.Fatalf("step %d (%s): sequence %d holds %d positions, want %d", step, what, s, len(got[s]), len(want[s]))
					}
					for p, x := range want[s] {
						if g, ok := got[s][p]; !ok || g != x {
							t.Fatalf("step %d (%s): sequence %d position %d holds %v (%v), want %v", step, what, s, p, g, ok, x)
						}
					}
					if pm := c.SeqPosMax(s); pm != maxPos(want[s]) {
						t.Fatalf("step %d (%s): SeqPosMax(%d) = %d, want %d", step, what, s, pm, maxPos(want[s]))
					}
				}
			}
			if err := b.Sync(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func maxPos(m map[int32]float32) int {
	p := -1
	for q := range m {
		p = max(p, int(q))
	}
	return p
}

// llama-cli's context shift, in llama.cpp's cell bookkeeping: after
// removing [keep, keep+d) and moving the rest down by d, the next token
// goes to the first freed cell, and a unified cache's rows scan the cells
// in use.
func TestShiftPlacement(t *testing.T) {
	b := cpu.New(1)
	defer b.Close()
	const cells, keep, d = 16, 3, 6
	c := newCache(t, b, kvcache.Options{Layers: 1, Cells: cells, Batch: cells})
	pos := make([]int32, cells-1)
	for i := range pos {
		pos[i] = int32(i)
	}
	if err := c.Begin(b, pos, make([]int32, len(pos))); err != nil {
		t.Fatal(err)
	}
	if err := c.SeqRemove(0, keep, keep+d); err != nil {
		t.Fatal(err)
	}
	if err := c.SeqShift(b, 0, keep+d, cells-1, -d); err != nil {
		t.Fatal(err)
	}
	for j := range cells {
		p, _ := c.Cell(j)
		want := int32(j)
		switch {
		case j >= keep && j < keep+d || j == cells-1:
			want = -1
		case j >= keep+d:
			want = int32(j - d)
		}
		if p != want {
			t.Fatalf("cell %d at position %d, want %d", j, p, want)
		}
	}
	if err := c.Begin(b, []int32{cells - 1 - d}, []int32{0}); err != nil {
		t.Fatal(err)
	}
	if p, _ := c.Cell(keep); p != cells-1-d {
		t.Fatalf("the next token went elsewhere than cell %d (which holds %d)", keep, p)
	}
	checkView(t, b, c, []int32{cells - 1 - d}, []int32{0}, 0, cells-1)
}

// SeqShift re-rotates the cached keys as llama.cpp's K-shift does. Keys
// stored at positions p and shifted by delta equal keys computed at p+delta
// within 1e-5 in an F32 cache (the rotation by delta is the rotation to
// p+delta up to float32 rounding of the angles), with NeoX and adjacent
// pairs, partial rotary dims and rope_freqs. In an F16 cache the shift is
// llama.cpp's: the f16 keys widened, turned by delta, rounded back, bit
// for bit; in a BF16 or quantised one likewise, the keys dequantised, turned
// and quantised again as llama.cpp's cpy stores a cache row
// (dtype.QuantizeCacheRow). Values and unmoved cells do not change.
func TestShiftRotates(t *testing.T) {
	for _, ct := range append([]dtype.Type{dtype.F32, dtype.F16}, dtype.CacheTypes...) {
		for _, neox := range []bool{false, true} {
			t.Run(fmt.Sprintf("%v/neox=%v", ct, neox), func(t *testing.T) {
				testShiftRotates(t, ct, neox)
			})
		}
	}
}

func testShiftRotates(t *testing.T, ct dtype.Type, neox bool) {
	const cells, batch, n, kvh, hd = 40, 8, 30, 2, 32
	const p0, delta = 7, -5 // positions 7…29 move to 2…24; 0…6 stay
	b := cpu.New(2)
	defer b.Close()
	c := newCache(t, b, kvcache.Options{Layers: 2, Cells: cells, Batch: batch, KVHeads: kvh, HeadDim: hd, K: ct, V: ct})
	row := kvh * hd
	freqs, _ := b.Alloc(dtype.F32, 6)
	b.WriteF32(freqs, 0, []float32{1, 1, 2, 4, 8, 40})
	r := backend.Rope{Dims: 12, Theta: 10000, Freqs: freqs, NeoX: neox}
	rng := rand.New(rand.NewPCG(3, 4))
	x := make([]float32, n*row)
	for i := range x {
		x[i] = rng.Float32()*4 - 2
	}
	// rope(x at positions) through the backend, for the stored keys and
	// for the keys recomputed at the shifted positions.
	rope := func(at func(i int) int32) []float32 {
		xt, _ := b.Alloc(dtype.F32, n, row)
		pt, _ := b.Alloc(dtype.I32, n)
		defer b.Free(xt)
		defer b.Free(pt)
		p := make([]int32, n)
		for i := range p {
			p[i] = at(i)
		}
		b.WriteF32(xt, 0, x)
		b.WriteI32(pt, 0, p)
		b.RoPE(xt, n, kvh, hd, pt, r)
		out := make([]float32, n*row)
		if err := b.ReadF32(xt, 0, out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	stored := rope(func(i int) int32 { return int32(i) })
	kt, _ := b.Alloc(dtype.F32, batch, row)
	vt, _ := b.Alloc(dtype.F32, batch, row)
	pt, _ := b.Alloc(dtype.I32, batch)
	for s := 0; s < n; s += batch {
		m := min(batch, n-s)
		pos := make([]int32, m)
		for i := range pos {
			pos[i] = int32(s + i)
		}
		if err := c.Begin(b, pos, make([]int32, m)); err != nil {
			t.Fatal(err)
		}
		b.WriteF32(kt, 0, stored[s*row:(s+m)*row])
		b.WriteF32(vt, 0, x[s*row:(s+m)*row])
		for il := range 2 {
			c.Store(b, il, kt, vt, m)
		}
	}
	if err := c.SeqShift(b, 0, p0, -1, delta); err != nil {
		t.Fatal(err)
	}
	if err := c.SeqShift(b, 0, 0, 1, 0); err != nil { // no delta: no change
		t.Fatal(err)
	}
	if !c.Shifted() {
		t.Fatal("no K-shift pending after SeqShift")
	}
	if err := c.Shift(b, []backend.Rope{r, r}, kt, pt); err != nil {
		t.Fatal(err)
	}
	recomputed := rope(func(i int) int32 {
		if i >= p0 {
			return int32(i + delta)
		}
		return int32(i)
	})
	// The F16 cache's expectation: its stored keys (rounded) turned by
	// delta on the backend and rounded again.
	// hold is what a cache of type ct keeps of the values v.
	hold := func(v []float32) []float32 {
		out := slices.Clone(v)
		if ct != dtype.F32 {
			raw := make([]byte, len(v)/ct.BlockSize()*ct.BlockBytes())
			dtype.QuantizeCacheRow(ct, raw, v)
			dtype.DequantizeRow(ct, out, raw)
		}
		return out
	}
	held := hold(stored)
	var f16want []float32
	if ct != dtype.F32 {
		saved := x
		x = held
		f16want = hold(rope(func(i int) int32 {
			if i >= p0 {
				return delta
			}
			return 0
		}))
		x = saved
	}
	for il := range 2 {
		kc, vc := c.Layer(il)
		got, gotV := make([]float32, n*row), make([]float32, n*row)
		if err := b.ReadF32(kc, 0, got); err != nil {
			t.Fatal(err)
		}
		if err := b.ReadF32(vc, 0, gotV); err != nil {
			t.Fatal(err)
		}
		wantV := hold(x)
		if !slices.Equal(gotV, wantV) {
			t.Fatalf("layer %d: the shift changed V", il)
		}
		for i := range got {
			switch {
			case i < p0*row && got[i] != held[i]:
				t.Fatalf("layer %d element %d of an unmoved cell: %v, was %v", il, i, got[i], held[i])
			case ct != dtype.F32 && got[i] != f16want[i]:
				t.Fatalf("layer %d element %d: %v, want llama.cpp's %v", il, i, got[i], f16want[i])
			case ct == dtype.F32 && math.Abs(float64(got[i]-recomputed[i])) > 1e-5:
				t.Fatalf("layer %d element %d: shifted %v, recomputed %v (|Δ| %g > 1e-5)", il, i, got[i], recomputed[i], math.Abs(float64(got[i]-recomputed[i])))
			}
		}
	}
	if c.Shifted() {
		t.Fatal("K-shift still pending after Shift")
	}
	for j := range n {
		p, _ := c.Cell(j)
		want := int32(j)
		if j >= p0 {
			want += delta
		}
		if p != want {
			t.Fatalf("cell %d at position %d, want %d", j, p, want)
		}
	}
}

// State and LoadState round-trip a sequence's cells (into another
// sequence, another layout, another cache type), and refuse truncated,
// padded, foreign and misshapen states with ErrState, leaving the target
// as it was.
func TestStateRoundTrip(t *testing.T) {
	b := cpu.New(1)
	defer b.Close()
	const fp = 0x1234
	src := newCache(t, b, kvcache.Options{Layers: 2, Cells: 32, Batch: 8, Seqs: 2, K: dtype.F16, V: dtype.F16})
	k, _ := b.Alloc(dtype.F32, 8, kvh*hd)
	v, _ := b.Alloc(dtype.F32, 8, kvh*hd)
	for s, n := range []int{5, 7} {
		pos, seq := make([]int32, n), make([]int32, n)
		for i := range pos {
			pos[i], seq[i] = int32(i+10*s), int32(s)
		}
		if err := src.Begin(b, pos, seq); err != nil {
			t.Fatal(err)
		}
		rowsOf(t, b, k, v, float32(50*s), n)
		src.Store(b, 0, k, v, n)
		src.Store(b, 1, k, v, n)
	}
	state, err := src.State(b, 1, fp)
	if err != nil {
		t.Fatal(err)
	}
	dst := newCache(t, b, kvcache.Options{Layers: 2, Cells: 30, Batch: 4, Seqs: 3, Layout: kvcache.PerStream, K: dtype.F32, V: dtype.F16})
	rows, _ := b.Alloc(dtype.F32, 4, kvh*hd)
	if err := dst.LoadState(b, 2, state, fp, rows); err != nil {
		t.Fatal(err)
	}
	want, got := seqTokens(t, b, src)[1], seqTokens(t, b, dst)[2]
	if !maps(want, got) {
		t.Fatalf("loaded %v, want %v", got, want)
	}
	back, err := dst.State(b, 2, fp)
	if err != nil {
		t.Fatal(err)
	}
	// K is f32 now but held f16 values: the same values again, larger.
	if err := src.LoadState(b, 0, back, fp, rows); err != nil {
		t.Fatal(err)
	}
	if !maps(seqTokens(t, b, src)[0], want) {
		t.Fatal("a state loaded back differs")
	}
	bad := map[string][]byte{
		"empty":     nil,
		"truncated": state[:len(state)-1],
		"padded":    append(slices.Clone(state), 0),
		"not one":   append([]byte("GGUF"), state[4:]...),
	}
	for name, s := range bad {
		if err := dst.LoadState(b, 2, s, fp, rows); !errors.Is(err, kvcache.ErrState) {
			t.Errorf("%s state: %v, want ErrState", name, err)
		}
	}
	if err := dst.LoadState(b, 2, state, fp+1, rows); !errors.Is(err, kvcache.ErrState) {
		t.Errorf("a foreign state: %v, want ErrState", err)
	}
	other := newCache(t, b, kvcache.Options{Layers: 2, Cells: 30, Batch: 4, KVHeads: 1, HeadDim: 8})
	if err := other.LoadState(b, 0, state, fp, rows); !errors.Is(err, kvcache.ErrState) {
		t.Errorf("a state of another shape: %v, want ErrState", err)
	}
	if !maps(seqTokens(t, b, dst)[2], want) {
		t.Fatal("a refused state changed the sequence")
	}
	if err := b.Sync(); err != nil {
		t.Fatal(err)
	}
}

func maps(a, b map[int32]float32) bool {
	if len(a) != len(b) {
		return false
	}
	for p, x := range a {
		if y, ok := b[p]; !ok || x != y {
			return false
		}
	}
	return true
}

// A quantised cache's state holds its values dequantised; loading it into
// a cache of the same types gives back the same Q8_0 and Q4_0 blocks (their
// scale is the largest value's, so requantising a dequantised row finds the
// same scale and levels) and BF16 values exactly.
func TestStateQuantized(t *testing.T) {
	b := cpu.New(1)
	defer b.Close()
	const fp, heads, dim, n = 7, 2, 32, 6
	row := heads * dim
	for _, kv := range [][2]dtype.Type{{dtype.Q8_0, dtype.Q4_0}, {dtype.BF16, dtype.Q8_0}} {
		o := kvcache.Options{Layers: 1, Cells: 16, Batch: 8, KVHeads: heads, HeadDim: dim, K: kv[0], V: kv[1], Seqs: 2}
		c := newCache(t, b, o)
		k, _ := b.Alloc(dtype.F32, 8, row)
		v, _ := b.Alloc(dtype.F32, 8, row)
		rng := rand.New(rand.NewPCG(1, 2))
		x := make([]float32, n*row)
		for i := range x {
			x[i] = rng.Float32()*6 - 3
		}
		b.WriteF32(k, 0, x)
		b.WriteF32(v, 0, x)
		pos, seq := make([]int32, n), make([]int32, n)
		for i := range pos {
			pos[i] = int32(i)
		}
		if err := c.Begin(b, pos, seq); err != nil {
			t.Fatal(err)
		}
		c.Store(b, 0, k, v, n)
		state, err := c.State(b, 0, fp)
		if err != nil {
			t.Fatal(err)
		}
		rows, _ := b.Alloc(dtype.F32, 4, row)
		if err := c.LoadState(b, 1, state, fp, rows); err != nil {
			t.Fatal(err)
		}
		kc, vc := c.Layer(0)
		for _, tt := range []backend.Tensor{kc, vc} {
			all := make([]float32, 16*row)
			if err := b.ReadF32(tt, 0, all); err != nil {
				t.Fatal(err)
			}
			// Sequence 0 holds cells 0…n-1, sequence 1 the next n.
			if !slices.Equal(all[:n*row], all[n*row:2*n*row]) {
				t.Fatalf("%v/%v: a loaded state's values differ from the saved ones", kv[0], kv[1])
			}
			if slices.Equal(all[:n*row], x) {
				t.Fatalf("%v/%v: the cache holds the F32 values unrounded", kv[0], kv[1])
			}
		}
	}
}

// Size is llama.cpp's arithmetic of a cache's memory: a 32k context of the
// Llama 3.2 1B shape (16 layers, 8 KV heads of 64) takes 1 GiB in f16 and
// 17/32 of it (34 bytes per 32 values) in q8_0; q4_0 takes 9/32 (18 per 32).
func TestSize(t *testing.T) {
	o := kvcache.Options{Layers: 16, KVHeads: 8, HeadDim: 64, Cells: 32768, K: dtype.F16, V: dtype.F16}
	f16, err := kvcache.Size(o)
	if err != nil || f16 != 1<<30 {
		t.Fatalf("f16: %d, %v; want 1 GiB", f16, err)
	}
	for _, c := range []struct {
		t    dtype.Type
		want int64
	}{{dtype.Q8_0, 17 << 25}, {dtype.Q4_0, 9 << 25}, {dtype.BF16, 1 << 30}, {dtype.F32, 2 << 30}} {
		o.K, o.V = c.t, c.t
		if got, err := kvcache.Size(o); err != nil || got != c.want {
			t.Errorf("%v: %d, %v; want %d", c.t, got, err, c.want)
		}
	}
	o.K, o.V, o.MaxBytes = dtype.F16, dtype.F16, 1<<30-1
	if _, err := kvcache.Size(o); err == nil {
		t.Error("f16 over MaxBytes: no error")
	}
	o.K, o.V = dtype.Q8_0, dtype.Q8_0
	if _, err := kvcache.Size(o); err != nil {
		t.Errorf("q8_0 within MaxBytes: %v", err)
	}
}

// Flash is -fa's rule: auto turns flash attention on for caches the mul_mat
// graph cannot read; off with such a cache is an error naming it.
func TestFlash(t *testing.T) {
	for _, c := range []struct {
		mode   string
		k, v   dtype.Type
		want   bool
		wantOK bool
	}{
		{"auto", dtype.F16, dtype.F16, false, true}, {"", dtype.F32, dtype.F16, false, true},
		{"auto", dtype.Q8_0, dtype.F16, true, true}, {"auto", dtype.F16, dtype.Q4_0, true, true},
		{"on", dtype.F16, dtype.F16, true, true}, {"off", dtype.F16, dtype.F32, false, true},
		{"off", dtype.F16, dtype.Q8_0, false, false}, {"off", dtype.BF16, dtype.F16, false, false},
		{"maybe", dtype.F16, dtype.F16, false, false},
	} {
		got, err := kvcache.Flash(c.mode, c.k, c.v)
		if got != c.want || (err == nil) != c.wantOK {
			t.Errorf("Flash(%q, %v, %v) = %v, %v; want %v, ok %v", c.mode, c.k, c.v, got, err, c.want, c.wantOK)
		}
	}
}
