package opencl

import (
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/glint-llm/glint/backend"
	"github.com/glint-llm/glint/backend/backendtest"
	"github.com/glint-llm/glint/dtype"
	"github.com/glint-llm/glint/kernels"
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
			b, err := open(deviceOf(shared), v, testFlavour)
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

// TestAttentionTile checks how attention_K_V's work-groups are tiled: the
// most query heads of a KV head that divide their number, then the most
// prompt rows, within ATT_Q queries and the device's local memory (a
// query of head size 64 with 32 lanes takes 9728 bytes at 64 work-items);
// else one query with fewer lanes.
func TestAttentionTile(t *testing.T) {
	cases := []struct {
		local int64
		gq, n int
		want  attnTile
		why   string
	}{
		{512 << 10, 4, 1, attnTile{4, 1, 32}, "decode: the KV head's four query heads"},
		{512 << 10, 4, 17, attnTile{4, 2, 32}, "prompt: and two rows"},
		{512 << 10, 1, 128, attnTile{1, 8, 32}, "no GQA: eight rows"},
		{512 << 10, 7, 5, attnTile{7, 1, 32}, "seven heads leave no room for a second row"},
		{48 << 10, 4, 17, attnTile{4, 1, 32}, "48 KiB: four queries"},
		{32 << 10, 4, 17, attnTile{2, 1, 32}, "32 KiB: three queries fit, two heads divide four"},
		{8 << 10, 4, 1, attnTile{1, 1, 16}, "8 KiB: one query, 16 lanes"},
	}
	for _, c := range cases {
		b := &Backend{info: DeviceInfo{LocalMem: c.local}}
		k := &kern{ok: true, wg: 64}
		if got := b.attnLocal("Attention", k, 64, 32, c.gq, c.n); got != c.want {
			t.Errorf("%s: local %d, gq %d, n %d: tile %+v, want %+v", c.why, c.local, c.gq, c.n, got, c.want)
		}
	}
}

// TestFastPaths is the conformance suite on each build that takes one
// vendor fast path, where the device offers its extension: sub-group
// maxima (SUBGROUPS in common.cl), half conversions (FP16) and packed
// integer dot products (DOT4_KHR in gemm.cl). The portable build is every
// other test's.
func TestFastPaths(t *testing.T) {
	// offers and takes point at the extension's flag in a device's info and
	// at the fast path's in a variant.
	paths := []struct {
		name, ext string
		offers    func(*DeviceInfo) *bool
		takes     func(*variant) *bool
	}{
		{"subgroups", "cl_khr_subgroups or cl_intel_subgroups",
			func(d *DeviceInfo) *bool { return &d.Subgroups }, func(v *variant) *bool { return &v.subgroups }},
		{"fp16", "cl_khr_fp16", func(d *DeviceInfo) *bool { return &d.FP16 }, func(v *variant) *bool { return &v.fp16 }},
		{"intdot", "cl_khr_integer_dot_product",
			func(d *DeviceInfo) *bool { return &d.IntDot }, func(v *variant) *bool { return &v.intDot }},
	}
	eachDevice(t, func(t *testing.T, dev *Backend) {
		for _, p := range paths {
			t.Run(p.name, func(t *testing.T) {
				d, v := deviceOf(dev), dev.v.portable()
				*p.takes(&v) = true
				// Some compilers take the built-ins of an extension their
				// device does not list (llvmpipe's take the sub-groups'):
				// there the ops that use them run.
				listed := *p.offers(&d.info)
				*p.offers(&d.info) = true
				b, err := open(d, v, testFlavour)
				switch {
				case err != nil && listed:
					t.Fatal(err)
				case err != nil || b.v != v && !listed:
					if err == nil {
						b.Close()
					}
					t.Skipf("%s does not offer %s", dev.info.Name, p.ext)
				case b.v != v:
					b.Close()
					t.Skipf("%s lists %s, but its compiler refused the build that takes it (the portable build serves)", dev.info.Name, p.ext)
				case !listed:
					defer b.Close()
					t.Logf("%s does not list %s, but its compiler takes the build: checking the ops that use it", dev.info.Name, p.ext)
					fastPathOps(t, b)
					return
				}
				b.Close()
				backendtest.Run(t, func(t *testing.T) backend.Backend {
					b, err := open(d, v, testFlavour)
					if err != nil {
						t.Fatal(err)
					}
					return b
				})
			})
		}
	})
}

// fastPathOps checks, against the CPU backend, the ops a fast path changes
// (maxima, roundings to half, integer dot products): attention over F32
// and F16 caches, single pass (grouped-query decode, a prompt's rows) and
// split, softmax, and a prompt matmul of each kind of weight.
func fastPathOps(t *testing.T, b *Backend) {
	type shape struct{ heads, kvHeads, hd, parts int }
	cases := []struct {
		name string
		view backendtest.View
		s    shape
	}{
		{"decode", backendtest.Causal(1, 299), shape{8, 1, 64, 1}},
		{"prompt", backendtest.Prompt(9, 30), shape{4, 2, 16, 1}},
		{"split", backendtest.Causal(1, 699), shape{4, 1, 64, 3}},
	}
	for _, c := range cases {
		for _, kt := range []dtype.Type{dtype.F32, dtype.F16} {
			t.Run(fmt.Sprintf("attention/%s/K%v", c.name, kt), func(t *testing.T) {
				f := newFixture(t, b)
				f.o.attnParts = c.s.parts
				defer func() { f.o.attnParts = 0 }()
				n, cells := c.view.N(), c.view.Hi
				cols, kvCols := c.s.heads*c.s.hd, c.s.kvHeads*c.s.hd
				q := f.f32(f.rand(n*cols, -3, 3), n, cols)
				k := f.cache(kt, f.rand(cells*kvCols, -1, 1), cells, c.s.kvHeads, c.s.hd)
				v := f.cache(kt, f.rand(cells*kvCols, -1, 1), cells, c.s.kvHeads, c.s.hd)
				out := f.f32(nil, n, cols)
				a := backend.Attn{Heads: c.s.heads, KVHeads: c.s.kvHeads, HeadDim: c.s.hd, Scale: float32(1 / math.Sqrt(float64(c.s.hd)))}
				vc, vo := f.view(c.view)
				f.c.Attention(out.c, q.c, k.c, v.c, n, vc, a)
				f.o.Attention(out.o, q.o, k.o, v.o, n, vo, a)
				co, oo := f.read(out, n*cols)
				// The split adds its partitions' sums otherwise (see
				// TestAttentionSplit); the single pass gives the bits.
				tol := 0.0
				if c.s.parts > 1 || !f.o.Info().FP64 {
					tol = 4e-6
				}
				f.close("attention", co, oo, nil, 0, tol)
			})
		}
	}
	for _, dt := range []dtype.Type{dtype.F16, dtype.Q8_0, dtype.Q4_K} {
		t.Run(fmt.Sprintf("matmul/%v", dt), func(t *testing.T) {
			f := newFixture(t, b)
			const rows, cols, n = 40, 512, 9
			w := f.weight(dt, []int{rows, cols}, randomWeight(f.rng, dt, rows, cols))
			x := f.f32(f.rand(n*cols, -1, 1), n, cols)
			dst := f.f32(nil, n, rows)
			f.c.MatMulTransposed(dst.c, x.c, w.c, n)
			f.o.MatMulTransposed(dst.o, x.o, w.o, n)
			co, oo := f.read(dst, n*rows)
			f.close("matmul", co, oo, nil, 0, 0)
		})
	}
}

// TestKernelBuilds runs every build of the kernels the backend makes
// (variant.options: GPU and CPU variants, each vendor fast path) through
// clang's OpenCL C front end, so that a fast path for an extension no
// device here offers still has to compile. It skips where no clang is
// installed.
func TestKernelBuilds(t *testing.T) {
	var cc string
	for _, name := range []string{"clang", "clang-15", "clang-16", "clang-14"} {
		if p, err := exec.LookPath(name); err == nil {
			cc = p
			break
		}
	}
	if cc == "" {
		t.Skip("no clang: the kernel builds are not checked by its OpenCL C front end")
	}
	src := filepath.Join(t.TempDir(), "glint.cl")
	if err := os.WriteFile(src, []byte(kernels.Source()), 0o644); err != nil {
		t.Fatal(err)
	}
	all := DeviceInfo{CorrectDivide: true, IntDot: true, Subgroups: true, FP16: true}
	builds := map[string]variant{
		"gpu":       {},
		"cpu":       {cpu: true},
		"approx":    {approxDiv: true},
		"intdot":    {intDot: true},
		"subgroups": {subgroups: true},
		"fp16":      {fp16: true},
		"all":       {cpu: true, intDot: true, subgroups: true, fp16: true},
	}
	for name, v := range builds {
		t.Run(name, func(t *testing.T) {
			args := append([]string{"-x", "cl", "-target", "spir64", "-Xclang", "-finclude-default-header", "-fsyntax-only", "-Werror=implicit-function-declaration"},
				strings.Fields(v.options(all))...)
			out, err := exec.Command(cc, append(args, src)...).CombinedOutput()
			if err != nil {
				t.Fatalf("%s %s: %v\n%s", cc, strings.Join(args, " "), err, out)
			}
		})
	}
}
