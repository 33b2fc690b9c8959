package opencl

import (
	"fmt"
	"math"
	"testing"

	"github.com/glint-llm/glint/dtype"
)

// TestTiledGEMM checks the GPU variant's prompt matmul (mmt_T, gemm.cl)
// bit for bit against the CPU backend for every weight type: the block
// formats sum in ggml's order as the CPU does, the float weights in the
// CPU's prefill order. The shapes cross tile edges in rows and tokens
// (several tiles of each, partial last ones; 2, 9 and 70 tokens take one,
// four and sixteen token rows of work-items), take rows long enough for
// several staged chunks, with a partial last chunk, and Q4_0 runs both of
// its kinds (rows a multiple of 8 or not). It runs on the portable build
// and, where the device offers cl_khr_integer_dot_product, on the build
// that takes it (DOT4 in gemm.cl): the vendor fast path's conformance test.
func TestTiledGEMM(t *testing.T) { eachDevice(t, testTiledGEMM) }

func testTiledGEMM(t *testing.T, dev *Backend) {
	for _, build := range []string{"portable", "intdot"} {
		t.Run(build, func(t *testing.T) {
			v := dev.v.portable()
			v.cpu = false
			if build == "intdot" {
				if !dev.info.IntDot {
					t.Skipf("%s does not offer cl_khr_integer_dot_product", dev.info.Name)
				}
				v.intDot = true
			}
			gpu, err := open(deviceOf(dev), v, testFlavour)
			if err != nil {
				t.Fatal(err)
			}
			defer gpu.Close()
			if gpu.v != v {
				t.Skipf("%s lists cl_khr_integer_dot_product, but its compiler refused the build that takes it (the portable build serves)", dev.info.Name)
			}
			tiledGEMM(t, gpu)
		})
	}
}

func tiledGEMM(t *testing.T, gpu *Backend) {
	type shape struct{ rows, cols int }
	for _, wt := range weightTypes {
		cols := 256*3 + 32 // chunks of 256 and a partial one
		switch {
		case wt.dt.BlockSize() == 256:
			cols = 256 * 3
		case !wt.dt.Quantized():
			cols = 64*4 + 37 // the float chunks of 64, a partial one, odd
		}
		shapes := []shape{{67, cols}, {9, matCols[wt.dt]}}
		if wt.dt == dtype.Q4_0 {
			shapes = append(shapes, shape{72, cols})
		}
		for _, s := range shapes {
			for _, n := range []int{2, 9, 70} {
				t.Run(fmt.Sprintf("%v/%dx%d/n=%d", wt.dt, s.rows, s.cols, n), func(t *testing.T) {
					f := newFixture(t, gpu)
					w := f.weight(wt.dt, []int{s.rows, s.cols}, randomWeight(f.rng, wt.dt, s.rows, s.cols))
					x := f.f32(f.rand((n+1)*s.cols, -1, 1), n+1, s.cols)
					dst := f.f32(nil, n+1, s.rows)
					f.c.MatMulTransposed(dst.c, x.c, w.c, n)
					before := gpu.Stats().Launches
					f.o.MatMulTransposed(dst.o, x.o, w.o, n)
					if gpu.Stats().Launches == before {
						t.Fatal("no launch")
					}
					c, o := f.read(dst, (n+1)*s.rows)
					// Row n, not asked for, stays zero in both.
					for i := range c {
						if math.Float32bits(c[i]) != math.Float32bits(o[i]) {
							t.Fatalf("token %d row %d: cpu %v, opencl %v: not the same bits", i/s.rows, i%s.rows, c[i], o[i])
						}
					}
				})
			}
		}
	}
}

// TestTiledGEMMPlan checks the work-group choice: 16×16 for a long prompt
// where it fits, fewer token rows and more weight rows for a few tokens,
// smaller tiles where the kernel's work-group limit or the local memory is
// smaller (llvmpipe's 32 KiB), and no tile at all where not even one fits.
func TestTiledGEMMPlan(t *testing.T) {
	total := func(s mmtShape) (n int) {
		for _, l := range s.locals() {
			n += l
		}
		return n
	}
	cases := []struct {
		dt       dtype.Type
		r8       bool
		n        int
		max      int
		local    int64
		tx, ty   int
		bm, bn   int
		wantFits bool
	}{
		{dtype.Q4_0, true, 128, 1024, 48 << 10, 16, 16, 64, 64, true},
		{dtype.Q4_K, false, 128, 1024, 48 << 10, 16, 16, 32, 64, true},
		{dtype.F16, false, 128, 1024, 48 << 10, 16, 16, 32, 64, true},
		{dtype.Q4_0, true, 128, 128, 48 << 10, 16, 8, 64, 32, true},
		{dtype.Q4_0, true, 128, 1024, 24 << 10, 8, 8, 32, 32, true},
		{dtype.Q4_0, true, 128, 1024, 1 << 10, 0, 0, 0, 0, false},
		{dtype.Q4_K, false, 2, 1024, 48 << 10, 64, 1, 128, 4, true},
		{dtype.Q4_0, true, 2, 1024, 48 << 10, 32, 1, 128, 4, true},
		{dtype.Q4_K, false, 9, 1024, 48 << 10, 64, 4, 128, 16, true},
		{dtype.Q4_K, false, 2, 1024, 32 << 10, 32, 1, 64, 4, true},
		{dtype.F16, false, 64, 1024, 48 << 10, 16, 16, 32, 64, true},
		{dtype.F16, false, 65, 1024, 48 << 10, 16, 16, 32, 64, true},
	}
	for _, c := range cases {
		b := &Backend{info: DeviceInfo{LocalMem: c.local}}
		s, ok := b.mmtPlan(&kern{max: c.max}, c.dt, c.r8, c.n)
		if ok != c.wantFits {
			t.Errorf("%v r8=%v n=%d max %d local %d: fits %v, want %v", c.dt, c.r8, c.n, c.max, c.local, ok, c.wantFits)
			continue
		}
		if !ok {
			continue
		}
		if s.tx != c.tx || s.ty != c.ty || s.bm != c.bm || s.bn != c.bn || int64(total(s)) > c.local {
			t.Errorf("%v r8=%v n=%d max %d local %d: %+v (%d bytes), want %d×%d items, %d×%d tile", c.dt, c.r8, c.n, c.max, c.local, s, total(s), c.tx, c.ty, c.bm, c.bn)
		}
	}
}
