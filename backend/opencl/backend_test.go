package opencl

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/glint-llm/glint/backend"
	"github.com/glint-llm/glint/backend/backendtest"
	"github.com/glint-llm/glint/backend/opencl/cl"
	"github.com/glint-llm/glint/dtype"
	"github.com/glint-llm/glint/kernels"
)

func TestDevicesListPoCL(t *testing.T) {
	ds := requireDevice(t)
	found := false
	for i, d := range ds {
		t.Log(d)
		if d.Index != i || d.Name == "" || d.GlobalMem <= 0 || d.MaxAlloc <= 0 || d.MaxAlloc > d.GlobalMem || d.ComputeUnits <= 0 {
			t.Errorf("implausible device info: %+v", d)
		}
		if !strings.HasPrefix(d.CVersion, "OpenCL C ") {
			t.Errorf("device %d: OpenCL C version %q", i, d.CVersion)
		}
		if strings.Contains(d.Platform, "Portable Computing Language") {
			found = true
		}
	}
	if !found {
		t.Skip("PoCL is not among the devices (the devices above were checked; apt install pocl-opencl-icd to test PoCL)")
	}
}

func TestDeviceSelector(t *testing.T) {
	ds := requireDevice(t)
	for _, sel := range []string{"no-such-device-xyz", "99", "-1"} {
		_, err := New(Options{Device: sel, Numerics: testNumerics})
		if err == nil {
			t.Fatalf("New(%q) succeeded", sel)
		}
		// The error lists what can be chosen.
		if !strings.Contains(err.Error(), ds[0].Name) {
			t.Errorf("New(%q): error does not list the devices: %v", sel, err)
		}
	}
	// Index and a case-changed substring of the name select the device.
	for _, sel := range []string{"0", strings.ToUpper(ds[0].Name[:4])} {
		b, err := New(Options{Device: sel, Numerics: testNumerics})
		if err != nil {
			t.Fatalf("New(%q): %v", sel, err)
		}
		if b.Device() != ds[0].Name {
			t.Errorf("New(%q) opened %q, want %q", sel, b.Device(), ds[0].Name)
		}
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestBuildFailureLog(t *testing.T) { eachDevice(t, testBuildFailureLog) }

func testBuildFailureLog(t *testing.T, dev *Backend) {
	b := dev
	bad := kernels.Source() + "\nkernel void broken(global float* x) { x[0] = undefined_name; }\n"
	_, err := buildProgram(b.ctx, b.dev, bad, b.v.options(b.info))
	var ce *cl.Error
	if !errors.As(err, &ce) {
		t.Fatalf("build of a broken source: got %v, want a *cl.Error", err)
	}
	msg := err.Error()
	for _, want := range []string{"opencl: clBuildProgram: CL_BUILD_PROGRAM_FAILURE", "undefined_name"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not contain %q", msg, want)
		}
	}
}

func TestCodeNames(t *testing.T) {
	for code, want := range map[int32]string{0: "CL_SUCCESS", -11: "CL_BUILD_PROGRAM_FAILURE", -61: "CL_INVALID_BUFFER_SIZE", -9999: "CL_ERROR(-9999)"} {
		if got := cl.CodeName(code); got != want {
			t.Errorf("CodeName(%d) = %q, want %q", code, got, want)
		}
	}
}

// TestTraffic checks the counters: a token id up, an argmax, the index
// down: 4 bytes each way, one launch, which reads the 1000 logits and
// writes the index in device memory (Stats.Moved).
func TestTraffic(t *testing.T) { eachDevice(t, testTraffic) }

func testTraffic(t *testing.T, dev *Backend) {
	b := dev
	ids, err := b.Alloc(dtype.I32, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Free(ids)
	logits, err := b.Alloc(dtype.F32, 1, 1000)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Free(logits)
	if err := b.WriteF32(logits, 123, []float32{5}); err != nil {
		t.Fatal(err)
	}
	b.ResetStats()
	if err := b.WriteI32(ids, 0, []int32{7}); err != nil {
		t.Fatal(err)
	}
	b.Argmax(ids, logits, 1)
	got := make([]int32, 1)
	if err := b.ReadI32(ids, 0, got); err != nil {
		t.Fatal(err)
	}
	if got[0] != 123 {
		t.Fatalf("argmax = %d, want 123", got[0])
	}
	if s := b.Stats(); s != (Stats{ToDevice: 4, FromDevice: 4, Launches: 1, Moved: 4*1000 + 4}) {
		t.Fatalf("stats %+v, want 4 bytes each way, 1 launch and 4004 bytes moved", s)
	}
}

// TestNoAllocs checks that a decode step's ops allocate nothing on the Go
// heap, as the engine's 0-allocations-per-token goal needs.
func TestNoAllocs(t *testing.T) { eachDevice(t, testNoAllocs) }

func testNoAllocs(t *testing.T, dev *Backend) {
	b := dev
	const dim, heads, hd, maxSeq = 64, 4, 16, 8
	alloc := func(dt dtype.Type, shape ...int) backend.Tensor {
		x, err := b.Alloc(dt, shape...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Free(x) })
		return x
	}
	w, err := b.Weight("w", dtype.Q4_0, []int{dim, dim}, make([]byte, dim*dim/32*18))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Free(w)
	x, y, norm := alloc(dtype.F32, 1, dim), alloc(dtype.F32, 1, dim), alloc(dtype.F32, dim)
	k, v := alloc(dtype.F32, maxSeq, heads, hd), alloc(dtype.F32, maxSeq, heads, hd)
	ids := alloc(dtype.I32, 1)
	pos := alloc(dtype.I32, 1)
	view, err := backendtest.Causal(1, 3).Upload(b)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Free(view.Rows); b.Free(view.Cells) })
	attn := backend.Attn{Heads: heads, KVHeads: heads, HeadDim: hd, Scale: 0.25}
	tok := make([]int32, 1)
	step := func() {
		b.RMSNorm(y, x, norm, 1, 1e-5)
		b.MatMulTransposed(x, y, w, 1)
		b.RoPE(x, 1, heads, hd, pos, backend.Rope{Dims: hd, Theta: 10000})
		b.CopySlice(k, 3*dim, x, 0, dim)
		b.Attention(y, x, k, v, 1, view, attn)
		b.Add(x, x, y, 1)
		b.SiLUMul(x, x, y, 1)
		b.Argmax(ids, x, 1)
		if err := b.ReadI32(ids, 0, tok); err != nil {
			t.Fatal(err)
		}
	}
	step() // the RoPE table is made on first use
	if a := testing.AllocsPerRun(5, step); a != 0 {
		t.Fatalf("%v allocations per step, want 0", a)
	}
	if err := b.Sync(); err != nil {
		t.Fatal(err)
	}
}

// TestErrors uses its own backend: errors are sticky.
func TestErrors(t *testing.T) { eachDevice(t, testErrors) }

func testErrors(t *testing.T, dev *Backend) {
	b := another(t, dev)
	info := b.Info()

	_, err := b.Alloc(dtype.F32, int(info.MaxAlloc/4)+1)
	if err == nil || !strings.Contains(err.Error(), "CL_DEVICE_MAX_MEM_ALLOC_SIZE") {
		t.Errorf("oversized Alloc: %v", err)
	}
	if _, err := b.Weight("blk.0.bad", dtype.Q4_0, []int{2, 32}, make([]byte, 35)); err == nil || !strings.Contains(err.Error(), `"blk.0.bad"`) {
		t.Errorf("Weight with the wrong byte count: %v", err)
	}
	if _, err := b.Alloc(dtype.Q4_0, 3, 17); err == nil {
		t.Error("Alloc of a partial Q4_0 block succeeded")
	}

	x, _ := b.Alloc(dtype.F32, 2, 8)
	ids, _ := b.Alloc(dtype.I32, 1)
	table, err := b.Weight("token_embd.weight", dtype.F32, []int{4, 8}, make([]byte, 4*8*4))
	if err != nil {
		t.Fatal(err)
	}
	if err := b.ReadF32(x, 10, make([]float32, 7)); err == nil {
		t.Error("ReadF32 past the end succeeded")
	}
	if err := b.WriteI32(x, 0, []int32{1}); err == nil {
		t.Error("WriteI32 to an F32 tensor succeeded")
	}
	if err := b.Err(); err != nil {
		t.Fatalf("a refused transfer made the backend fail: %v", err)
	}

	// A bad id is found on the device and reported by Sync.
	if err := b.WriteI32(ids, 0, []int32{4}); err != nil {
		t.Fatal(err)
	}
	b.Embedding(x, table, ids, 1)
	if err := b.Sync(); err == nil || !strings.Contains(err.Error(), "token id 4") {
		t.Fatalf("Embedding of id 4 in a vocab of 4: Sync = %v", err)
	}

	// A fresh backend: a shape error is recorded, sticky, and wraps ErrShape.
	b2 := another(t, dev)
	y, _ := b2.Alloc(dtype.F32, 2, 8)
	w, _ := b2.Weight("w", dtype.F32, []int{3, 9}, make([]byte, 3*9*4))
	b2.MatMulTransposed(y, y, w, 1)
	first := b2.Err()
	if !errors.Is(first, backend.ErrShape) {
		t.Fatalf("matmul with mismatched columns: %v", first)
	}
	b2.Scale(y, y, 1, 2)
	b2.Add(y, y, w, 1) // also wrong, but the first error stays
	if err := b2.Sync(); err != first {
		t.Fatalf("Sync = %v, want the first error %v", err, first)
	}
	b2.Free(y)

	b3 := another(t, dev)
	z, _ := b3.Alloc(dtype.F32, 8)
	b3.Free(z)
	b3.Scale(z, z, 1, 2)
	if err := b3.Err(); err == nil || !strings.Contains(err.Error(), "freed") {
		t.Fatalf("op on a freed tensor: %v", err)
	}
	b4 := another(t, dev)
	wt, _ := b4.Weight("output_norm.weight", dtype.F32, []int{8}, make([]byte, 32))
	b4.Scale(wt, wt, 1, 2)
	if err := b4.Err(); err == nil || !strings.Contains(err.Error(), "read-only weight") {
		t.Fatalf("op writing a weight: %v", err)
	}
	b4.Close()
	if _, err := b4.Alloc(dtype.F32, 1); err == nil {
		t.Fatal("Alloc after Close succeeded")
	}
}

func TestProfile(t *testing.T) { eachDevice(t, testProfile) }

func testProfile(t *testing.T, dev *Backend) {
	b := dev
	x, err := b.Alloc(dtype.F32, 3, 100)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Free(x)
	b.ResetStats()
	b.SetProfiling(true)
	for range 4 {
		b.Scale(x, x, 3, 0.5)
	}
	b.Add(x, x, x, 3)
	b.SetProfiling(false)
	b.Scale(x, x, 3, 0.5) // not profiled
	if err := b.Sync(); err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, kt := range b.Profile() {
		if kt.Total < 0 {
			t.Errorf("%s: negative time %v", kt.Name, kt.Total)
		}
		got[kt.Name] = kt.Calls
	}
	if len(got) != 2 || got["scale"] != 4 || got["add"] != 1 {
		t.Fatalf("profile calls %v, want scale 4, add 1", got)
	}
	if s := b.Stats(); s.Launches != 6 {
		t.Fatalf("%d launches, want 6", s.Launches)
	}
}

// TestNoPlatform runs this test binary again with the ICD loader pointed at
// an empty vendor folder, so that no platform exists.
func TestNoPlatform(t *testing.T) {
	if os.Getenv("GLINT_OPENCL_NO_PLATFORM") == "1" {
		_, err := New(Options{Numerics: testNumerics})
		fmt.Printf("error: %v\n", err)
		return
	}
	if err := cl.Load(); err != nil {
		t.Skipf("no OpenCL loader: %v", err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestNoPlatform$", "-test.v")
	cmd.Env = append(os.Environ(), "GLINT_OPENCL_NO_PLATFORM=1", "OCL_ICD_VENDORS="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "error: opencl: no OpenCL platform found") || !strings.Contains(string(out), "pocl-opencl-icd") {
		t.Fatalf("without a platform New said:\n%s", out)
	}
}
