package backendtest

import (
	"fmt"

	"github.com/glint-llm/glint/backend"
	"github.com/glint-llm/glint/dtype"
)

// View is a backend.KVView on the host, for tests: the tables a backend
// reads, and Sees, the rule a reference applies to them.
type View struct {
	Rows   []int32 // [n, 4]: position, sequence id, range [lo, hi)
	Cells  []int32 // [cells, 3]: position, sequence mask low and high words
	Lo, Hi int
}

// Causal is the view kvcache gives a single sequence: n query rows at
// positions pos0…pos0+n-1, cell j at position j of sequence 0, and row i's
// range [0, pos0+i+1).
func Causal(n, pos0 int) View {
	v := View{Rows: make([]int32, 4*n), Cells: make([]int32, 3*(pos0+n)), Hi: pos0 + n}
	for i := range n {
		p := int32(pos0 + i)
		copy(v.Rows[4*i:], []int32{p, 0, 0, p + 1})
	}
	for j := range pos0 + n {
		copy(v.Cells[3*j:], []int32{int32(j), 1, 0})
	}
	return v
}

// Prompt is Causal as kvcache views a prompt: every row scans all the
// cells, and the positions mask those after it.
func Prompt(n, pos0 int) View {
	v := Causal(n, pos0)
	for i := range n {
		v.Rows[4*i+3] = int32(v.Hi)
	}
	return v
}

// N is the number of query rows.
func (v View) N() int { return len(v.Rows) / 4 }

// Sees reports whether row i sees cell j under a sliding window (0: none),
// by backend.KVView's rule.
func (v View) Sees(i, j, window int) bool {
	r, c := v.Rows[4*i:4*i+4], v.Cells[3*j:3*j+3]
	seq := r[1]
	mask := uint64(uint32(c[1])) | uint64(uint32(c[2]))<<32
	pos, cp := int64(r[0]), int64(c[0])
	return j >= int(r[2]) && j < int(r[3]) && mask>>seq&1 == 1 && cp <= pos && (window == 0 || pos-cp < int64(window))
}

// Upload writes the tables to new tensors on be (the caller frees them).
func (v View) Upload(be backend.Backend) (backend.KVView, error) {
	rows, err := be.Alloc(dtype.I32, max(v.N(), 1), 4)
	if err != nil {
		return backend.KVView{}, fmt.Errorf("view rows: %w", err)
	}
	cells, err := be.Alloc(dtype.I32, max(len(v.Cells)/3, 1), 3)
	if err != nil {
		be.Free(rows)
		return backend.KVView{}, fmt.Errorf("view cells: %w", err)
	}
	if err := be.WriteI32(rows, 0, v.Rows); err != nil {
		return backend.KVView{}, err
	}
	if err := be.WriteI32(cells, 0, v.Cells); err != nil {
		return backend.KVView{}, err
	}
	return backend.KVView{Rows: rows, Cells: cells, Lo: v.Lo, Hi: v.Hi}, nil
}
