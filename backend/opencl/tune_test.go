package opencl

import (
	"math"
	"strings"
	"testing"

	"github.com/glint-llm/glint/dtype"
)

// TestParseTune checks Options.Tune's grammar: each word's variant change,
// combinations, and a clear error for an unknown word or a bad group size.
func TestParseTune(t *testing.T) {
	gpu := variant{intDot: true, subgroups: true, fp16: true}
	cases := []struct {
		in    string
		want  variant
		items int
	}{
		{"", gpu, 0},
		{"native", gpu, 0},
		{"portable", variant{}, 0},
		{"no-dot4", variant{subgroups: true, fp16: true}, 0},
		{"no-subgroups, no-fp16", variant{intDot: true}, 0},
		{"cpu", variant{cpu: true, intDot: true, subgroups: true, fp16: true}, 0},
		{"cpu,portable,gemm=64", variant{cpu: true}, 64},
		{"gpu,gemm=16", gpu, 16},
		{"gemm=256", gpu, 256},
	}
	for _, c := range cases {
		tn, err := parseTune(c.in)
		if err != nil {
			t.Errorf("%q: %v", c.in, err)
			continue
		}
		if got := tn.apply(gpu); got != c.want || tn.gemmItems != c.items {
			t.Errorf("%q: %+v, gemm %d; want %+v, gemm %d", c.in, got, tn.gemmItems, c.want, c.items)
		}
	}
	if v, _ := parseTune("gpu"); v.apply(variant{cpu: true}).cpu {
		t.Error(`"gpu" kept the CPU class`)
	}
	for _, bad := range []string{"fast", "gemm=100", "gemm=8", "gemm=512", "gemm=x", "cpu,gpu"} {
		_, err := parseTune(bad)
		if err == nil || !strings.Contains(err.Error(), "tune") {
			t.Errorf("%q: error %v, want one naming the tune", bad, err)
		}
	}
}

// TestTiledGEMMPlanCap checks that gemm=N caps mmt_T's work-group as a
// smaller kernel limit would, halving the larger side first.
func TestTiledGEMMPlanCap(t *testing.T) {
	for _, c := range []struct{ cap, tx, ty int }{{0, 16, 16}, {128, 16, 8}, {64, 8, 8}, {16, 4, 4}} {
		b := &Backend{info: DeviceInfo{LocalMem: 48 << 10}, gemmItems: c.cap}
		s, ok := b.mmtPlan(&kern{max: 1024}, dtype.Q4_0, true, 128)
		if !ok || s.tx != c.tx || s.ty != c.ty {
			t.Errorf("gemm=%d: %+v (fits %v), want %d×%d items", c.cap, s, ok, c.tx, c.ty)
		}
	}
}

// TestTuneSameBits opens every device through New with the GPU kernels, no
// fast path and 64-item GEMM groups, and checks a prompt matmul against the
// CPU backend bit for bit: a tuning is a speed choice only.
func TestTuneSameBits(t *testing.T) {
	for _, d := range requireDevice(t) {
		t.Run(d.ShortName(), func(t *testing.T) {
			b, err := New(Options{Device: d.ShortName(), Tune: "gpu,portable,gemm=64", Numerics: testNumerics})
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			if b.mat.cpu || b.v.fastPaths(b.info) || b.gemmItems != 64 {
				t.Fatalf("tune not applied: shapes %+v, variant %+v, gemm %d", b.mat, b.v, b.gemmItems)
			}
			const rows, cols, n = 72, 512, 40
			f := newFixture(t, b)
			w := f.weight(dtype.Q4_0, []int{rows, cols}, randomWeight(f.rng, dtype.Q4_0, rows, cols))
			x := f.f32(f.rand(n*cols, -1, 1), n, cols)
			dst := f.f32(nil, n, rows)
			f.c.MatMulTransposed(dst.c, x.c, w.c, n)
			f.o.MatMulTransposed(dst.o, x.o, w.o, n)
			c, o := f.read(dst, n*rows)
			for i := range c {
				if math.Float32bits(c[i]) != math.Float32bits(o[i]) {
					t.Fatalf("token %d row %d: cpu %v, opencl %v", i/rows, i%rows, c[i], o[i])
				}
			}
		})
	}
	if _, err := New(Options{Tune: "bogus", Numerics: testNumerics}); err == nil || !strings.Contains(err.Error(), "bogus") {
		t.Errorf("New with tune bogus: %v, want an error naming it", err)
	}
}
