package opencl

import (
	"fmt"
	"math"

	"github.com/glint-llm/glint/backend/opencl/cl"
)

// ropeKey names a table of rotation frequencies.
type ropeKey struct {
	theta float32
	dims  int
}

// ropeTable returns the device table of theta^(-2j/dims) as float pairs
// (hi, lo) with hi+lo the float64 value (see rope.cl), made on first use.
func (b *Backend) ropeTable(theta float32, dims int) (cl.Mem, error) {
	key := ropeKey{theta, dims}
	if m, ok := b.ropeTables[key]; ok {
		return m, nil
	}
	tab := make([]float32, dims)
	for j := range dims / 2 {
		f := math.Pow(float64(theta), -2*float64(j)/float64(dims))
		hi := float32(f)
		tab[2*j], tab[2*j+1] = hi, float32(f-float64(hi))
	}
	m, err := b.ctx.NewBuffer(4 * dims)
	if err != nil {
		return cl.Mem{}, fmt.Errorf("opencl: RoPE table: %w", err)
	}
	if err := b.q.Write(m, 0, 4*dims, ptr(tab)); err != nil {
		m.Release()
		return cl.Mem{}, fmt.Errorf("opencl: RoPE table: %w", err)
	}
	if b.ropeTables == nil {
		b.ropeTables = map[ropeKey]cl.Mem{}
	}
	b.ropeTables[key] = m
	return m, nil
}
