package kvcache_test

import (
	"testing"

	"github.com/glint-llm/glint/backend/cpu"
	"github.com/glint-llm/glint/dtype"
	"github.com/glint-llm/glint/kvcache"
)

// Store appends rows at Len in [maxSeq, kvHeads, headDim] order; Advance
// refuses to pass the end; Reset starts over without freeing.
func TestAppendLayout(t *testing.T) {
	b := cpu.New(1)
	defer b.Close()
	const layers, maxSeq, kvh, hd = 2, 5, 2, 3
	c, err := kvcache.New(b, layers, maxSeq, kvh, hd)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Free(b)
	row := kvh * hd
	k, _ := b.Alloc(dtype.F32, 3, row)
	v, _ := b.Alloc(dtype.F32, 3, row)
	fill := func(base float32, n int) {
		x := make([]float32, n*row)
		for i := range x {
			x[i] = base + float32(i)
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
	gotK, gotV := make([]float32, maxSeq*row), make([]float32, maxSeq*row)
	b.ReadF32(kc, 0, gotK)
	b.ReadF32(vc, 0, gotV)
	for p := 0; p < maxSeq; p++ {
		for j := 0; j < row; j++ {
			want := float32(100 + p*row + j)
			if p >= 2 {
				want = float32(200 + (p-2)*row + j)
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
}
