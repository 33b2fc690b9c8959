package kvcache_test

import (
	"slices"
	"testing"

	"github.com/glint-llm/glint/backend/cpu"
	"github.com/glint-llm/glint/dtype"
	"github.com/glint-llm/glint/kvcache"
)

// Store appends rows at Len in [maxSeq, kvHeads, headDim] order, rounding
// them to an F16 cache (nearest even) or keeping F32 as is; Advance refuses
// to pass the end; Reset starts over without freeing.
func TestAppendLayout(t *testing.T) {
	for _, ct := range []dtype.Type{dtype.F32, dtype.F16} {
		t.Run(ct.String(), func(t *testing.T) {
			b := cpu.New(1)
			defer b.Close()
			const layers, maxSeq, kvh, hd = 2, 5, 2, 3
			c, err := kvcache.New(b, layers, maxSeq, 3, kvh, hd, ct, ct)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Free(b)
			if want := int64(layers * maxSeq * kvh * hd * 2 * ct.BlockBytes()); c.Bytes() != want {
				t.Errorf("Bytes %d, want %d", c.Bytes(), want)
			}
			row := kvh * hd
			k, _ := b.Alloc(dtype.F32, 3, row)
			v, _ := b.Alloc(dtype.F32, 3, row)
			// 100.3 + i is not an f16: the F16 cache must hold its rounding.
			val := func(base float32, i int) float32 { return base + 0.3 + float32(i) }
			fill := func(base float32, n int) {
				x := make([]float32, n*row)
				for i := range x {
					x[i] = val(base, i)
				}
				b.WriteF32(k, 0, x)
				for i := range x {
					x[i] = -x[i]
				}
				b.WriteF32(v, 0, x)
			}
			// positions 0-1 from one batch, then 2-4 from another, in layer 1
			fill(100, 2)
			c.Store(b, 1, k, v, 2)
			if err := c.Advance(2); err != nil {
				t.Fatal(err)
			}
			fill(200, 3)
			c.Store(b, 1, k, v, 3)
			if err := c.Advance(3); err != nil {
				t.Fatal(err)
			}
			if c.Len() != 5 {
				t.Fatalf("Len %d, want 5", c.Len())
			}
			kc, vc := c.Layer(1)
			if kc.DType() != ct || vc.DType() != ct {
				t.Fatalf("cache types %v/%v, want %v", kc.DType(), vc.DType(), ct)
			}
			gotK, gotV := make([]float32, maxSeq*row), make([]float32, maxSeq*row)
			if err := b.ReadF32(kc, 0, gotK); err != nil {
				t.Fatal(err)
			}
			if err := b.ReadF32(vc, 0, gotV); err != nil {
				t.Fatal(err)
			}
			for p := 0; p < maxSeq; p++ {
				for j := 0; j < row; j++ {
					want := val(100, p*row+j)
					if p >= 2 {
						want = val(200, (p-2)*row+j)
					}
					if ct == dtype.F16 {
						want = dtype.F16ToF32(dtype.F32ToF16(want))
					}
					if gotK[p*row+j] != want || gotV[p*row+j] != -want {
						t.Fatalf("position %d element %d: k %v v %v, want ±%v", p, j, gotK[p*row+j], gotV[p*row+j], want)
					}
				}
			}
			if err := c.Advance(1); err == nil {
				t.Fatal("Advance past maxSeq accepted")
			}
			c.Reset()
			if c.Len() != 0 {
				t.Fatalf("Len after Reset %d", c.Len())
			}
			if err := b.Sync(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// ParseType takes llama.cpp's names and refuses others with a clear error;
// New refuses types it cannot hold.
func TestTypes(t *testing.T) {
	for _, c := range []struct {
		in   string
		want dtype.Type
		ok   bool
	}{{"", dtype.F16, true}, {"f16", dtype.F16, true}, {"F32", dtype.F32, true}, {"q8_0", 0, false}, {"bf16", 0, false}} {
		got, err := kvcache.ParseType(c.in)
		if (err == nil) != c.ok || c.ok && got != c.want {
			t.Errorf("ParseType(%q) = %v, %v; want %v, ok %v", c.in, got, err, c.want, c.ok)
		}
	}
	b := cpu.New(1)
	defer b.Close()
	if _, err := kvcache.New(b, 1, 4, 1, 1, 8, dtype.Q8_0, dtype.F16); err == nil {
		t.Error("New accepted a Q8_0 cache")
	}
}

// Begin uploads a batch's rows and new cells: the view of one sequence,
// row i at position Len+i seeing cells [0, Len+i+1), cell j at position j
// of sequence 0, and View bounds every row by Len+n. Cells already stored
// keep their entries; batches that do not fit are refused.
func TestBeginView(t *testing.T) {
	b := cpu.New(1)
	defer b.Close()
	const maxSeq, batch = 9, 4
	c, err := kvcache.New(b, 1, maxSeq, batch, 1, 8, dtype.F16, dtype.F16)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Free(b)
	for _, n := range []int{3, 1, 4} {
		start := c.Len()
		if err := c.Begin(b, n); err != nil {
			t.Fatal(err)
		}
		v := c.View()
		if v.Lo != 0 || v.Hi != start+n {
			t.Fatalf("after %d: view [%d, %d), want [0, %d)", start, v.Lo, v.Hi, start+n)
		}
		rows, cells := make([]int32, 4*n), make([]int32, 3*(start+n))
		if err := b.ReadI32(v.Rows, 0, rows); err != nil {
			t.Fatal(err)
		}
		if err := b.ReadI32(v.Cells, 0, cells); err != nil {
			t.Fatal(err)
		}
		for i := range n {
			p := int32(start + i)
			if got, want := rows[4*i:4*i+4], []int32{p, 0, 0, p + 1}; !slices.Equal(got, want) {
				t.Errorf("after %d: row %d = %v, want %v", start, i, got, want)
			}
		}
		for j := range start + n {
			if got, want := cells[3*j:3*j+3], []int32{int32(j), 1, 0}; !slices.Equal(got, want) {
				t.Errorf("after %d: cell %d = %v, want %v", start, j, got, want)
			}
		}
		if err := c.Advance(n); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range []int{0, batch + 1, 2} { // 2: past the 9 cells after 8
		if err := c.Begin(b, n); err == nil {
			t.Errorf("Begin(%d) after %d of %d cells: no error", n, c.Len(), maxSeq)
		}
	}
	if err := b.Sync(); err != nil {
		t.Fatal(err)
	}
}
