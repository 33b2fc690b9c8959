package ggmlmath

import (
	"math"
	"testing"

	"github.com/glint-llm/glint/dtype"
)

// TestGELUTable checks every entry for |x| ≤ 10 of the F16 table against
// GELU's tanh form in float64: the float32 evaluation is within a few 2⁻²⁴
// of it relative to |x| (for negative x, 1 + tanh cancels), so an entry is
// the nearest F16 or, where the float64 value lies within that error of a
// rounding boundary, its neighbour.
func TestGELUTable(t *testing.T) {
	tab := GELUTable()
	if len(tab) != 1<<16 {
		t.Fatalf("table has %d entries", len(tab))
	}
	bad := 0
	for i, h := range tab {
		x := float64(dtype.F16ToF32(uint16(i)))
		if math.IsNaN(x) || math.IsInf(x, 0) || math.Abs(x) > 10 {
			continue
		}
		want := 0.5 * x * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(x+0.044715*x*x*x)))
		got := float64(dtype.F16ToF32(h))
		// Half an F16 step plus the float32 evaluation's error.
		step := math.Max(math.Abs(want)*0x1p-10, 0x1p-24)
		if d := math.Abs(got - want); d > 0.5*step+2*0x1p-24*math.Abs(x)+0x1p-40 {
			if bad < 5 {
				t.Errorf("table[%#04x] (x = %g) = %g, want %g (|Δ| %.3g)", i, x, got, want, d)
			}
			bad++
		}
	}
	if bad > 0 {
		t.Errorf("%d entries off", bad)
	}
}

func TestGELUBounds(t *testing.T) {
	for _, c := range []struct{ x, want float32 }{
		{-10, 0}, {-1e30, 0}, {10, 10}, {12.5, 12.5}, {0, 0},
	} {
		if got := GELU(c.x); got != c.want {
			t.Errorf("GELU(%g) = %g, want %g", c.x, got, c.want)
		}
	}
	// Within the table's range the result is the entry at x rounded to F16.
	x := float32(1.2345678)
	if got, want := GELU(x), dtype.F16ToF32(GELUTable()[dtype.F32ToF16(x)]); got != want {
		t.Errorf("GELU(%g) = %g, want the table's %g", x, got, want)
	}
}

func TestSoftCap(t *testing.T) {
	for _, x := range []float32{-1000, -31, -1, 0, 0.5, 29, 1e6} {
		c := float32(30)
		want := float64(c) * math.Tanh(float64(x)/float64(c))
		if got := SoftCap(x, c); math.Abs(float64(got)-want) > 1e-5*float64(c) {
			t.Errorf("SoftCap(%g, %g) = %g, want %g", x, c, got, want)
		}
	}
}
