package opencl

import (
	"fmt"
	"math"
	"testing"

	"github.com/glint-llm/glint/backend"
	"github.com/glint-llm/glint/backend/backendtest"
)

// TestOtherVariants runs the conformance suite with the kernel variants and
// launch shapes of the other device class (on a CPU device such as PoCL:
// the GPU ones, lanes per row and local-memory GEMM tiles), so that both
// are tested on any machine.
func TestOtherVariants(t *testing.T) {
	eachDevice(t, func(t *testing.T, shared *Backend) {
		v := shared.v
		v.cpu = !v.cpu
		cpu := v.cpu
		backendtest.Run(t, func(t *testing.T) backend.Backend {
			b, err := open(deviceOf(shared), v)
			if err != nil {
				t.Fatal(err)
			}
			if b.mat.cpu != cpu {
				t.Fatalf("open(cpu=%v) chose shapes %+v", cpu, b.mat)
			}
			return b
		})
	})
}

// TestAttentionSplit forces flash-decoding partitions and compares with the
// CPU backend, including partitions that end inside a chunk, heads
// narrower and wider than the work-group, and views of several sequences
// (partitions that hold no cell the row sees, a window, a row range that
// starts inside the view).
func TestAttentionSplit(t *testing.T) {
	eachDevice(t, testAttentionSplit)
}

func testAttentionSplit(t *testing.T, b *Backend) {
	type shape struct{ heads, kvHeads, hd int }
	views := []struct {
		name   string
		view   backendtest.View
		window int
		cap    float32
	}{
		{"len2", backendtest.Causal(1, 1), 0, 0},
		{"len300", backendtest.Causal(1, 299), 0, 0},
		{"len1000", backendtest.Causal(1, 999), 0, 0},
		{"window", backendtest.Causal(1, 999), 100, 0},
		{"softcap", backendtest.Causal(1, 299), 0, 2},
		{"interleaved", interleaved(700, 3, 1, 0, 700), 0, 0},
		{"subrange", interleaved(900, 2, 0, 600, 900), 0, 0},
	}
	for _, s := range []shape{{6, 2, 40}, {4, 4, 16}, {3, 1, 80}} {
		for _, vw := range views {
			for _, parts := range []int{2, 3, 7} {
				t.Run(fmt.Sprintf("h%d/kv%d/d%d/%s/parts%d", s.heads, s.kvHeads, s.hd, vw.name, parts), func(t *testing.T) {
					f := newFixture(t, b)
					f.o.attnParts = parts
					defer func() { f.o.attnParts = 0 }()
					cells := vw.view.Hi + 3
					cols, kvCols := s.heads*s.hd, s.kvHeads*s.hd
					q := f.f32(f.rand(cols, -3, 3), cols)
					k := f.f32(f.rand(cells*kvCols, -1, 1), cells, s.kvHeads, s.hd)
					v := f.f32(f.rand(cells*kvCols, -1, 1), cells, s.kvHeads, s.hd)
					out := f.f32(nil, cols)
					a := backend.Attn{Heads: s.heads, KVHeads: s.kvHeads, HeadDim: s.hd, Scale: float32(1 / math.Sqrt(float64(s.hd))),
						Window: vw.window, SoftCap: vw.cap}
					kc, ko := f.view(vw.view)
					f.c.Attention(out.c, q.c, k.c, v.c, 1, kc, a)
					before := f.o.Stats().Launches
					f.o.Attention(out.o, q.o, k.o, v.o, 1, ko, a)
					if l := f.o.Stats().Launches - before; l != 3 {
						t.Fatalf("%d launches, want 3 (statistics, partials and merge)", l)
					}
					c, o := f.read(out, cols)
					// Convex combinations of values in [-1, 1]; the merge
					// adds a few roundings of the partial weights, and
					// OpenCL's tanh is within a few ulp of the C library's.
					f.close("attention split", c, o, nil, 0, 4e-6)
				})
			}
		}
	}
}

// interleaved is a decode row of sequence seq over a cache of cells cells
// holding seqs sequences interleaved cell by cell (cell j is sequence j%seqs
// at position j/seqs), scanning [lo, hi).
func interleaved(cells, seqs, seq, lo, hi int) backendtest.View {
	v := backendtest.View{Hi: cells, Lo: lo}
	for j := range cells {
		v.Cells = append(v.Cells, int32(j/seqs), int32(1)<<(j%seqs), 0)
	}
	v.Rows = []int32{int32(cells / seqs), int32(seq), int32(lo), int32(hi)}
	return v
}

// TestAttentionPartitions checks the split heuristic: one group per head
// while heads fill the device or the context is short, more otherwise,
// never more than the context has chunks.
func TestAttentionPartitions(t *testing.T) {
	cases := []struct{ cus, n, kvLen, heads, want int }{
		{2, 1, 1000, 32, 1},       // a 2-core CPU: 32 heads are plenty
		{132, 1, 100, 32, 1},      // short context: one chunk
		{132, 1, 4096, 32, 16},    // a big GPU: 17 wanted, 16 chunks
		{132, 1, 1 << 20, 32, 17}, // ceil(4·132/32)
		{132, 5, 4096, 32, 1},     // prefill rows fill the device
	}
	for _, c := range cases {
		b := &Backend{info: DeviceInfo{ComputeUnits: c.cus}}
		if got := b.attnPartitions(c.n, c.kvLen, c.heads); got != c.want {
			t.Errorf("%d CUs, n=%d, kvLen %d, %d heads: %d partitions, want %d", c.cus, c.n, c.kvLen, c.heads, got, c.want)
		}
	}
}
