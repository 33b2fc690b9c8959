// Package opencl is glint's GPU backend: backend.Backend on any OpenCL 1.2
// device (NVIDIA, AMD, Intel, Apple, or PoCL on a CPU). Weights stay in their
// stored type in device memory and are dequantised inside the kernels
// (package kernels); activations and the workspace are F32 device buffers
// allocated once, the KV cache F32 or F16 (attention rounds where llama.cpp
// rounds for an f16 cache, see attention.cl). Matmuls round their
// activations as dtype.RoundActivations defines, as the CPU backend does:
// block-format weights to int8 blocks, multiplied in integers; F16 and BF16
// weights to F16 and BF16. Ops are queued asynchronously; only the Read
// calls, Sync and Close wait.
//
// A Backend is not safe for concurrent use. Its kernels need no OpenCL
// extension, and take the vendor fast paths a device offers (see variant);
// the program is built once per device per process.
package opencl

import (
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/glint-llm/glint/backend"
	"github.com/glint-llm/glint/backend/opencl/cl"
	"github.com/glint-llm/glint/dtype"
	"github.com/glint-llm/glint/kernels"
	"github.com/glint-llm/glint/numerics"
)

// Options selects the device and, for benchmarks, how its kernels are built
// and launched.
type Options struct {
	// Device is "" for the first GPU (else the first device), a number for
	// an index in Devices' order, or else a device's ShortName ("pocl",
	// "llvmpipe") or a case-insensitive substring of its name.
	Device string
	// Tune is "" (what suits the device) or a comma-separated list of
	// native, portable, no-dot4, no-subgroups, no-fp16, cpu, gpu and gemm=N
	// (see parseTune): other kernel variants and GEMM work-groups, each
	// giving the same bits.
	Tune string
	// Numerics.Flavour names the llama.cpp CPU build whose arithmetic the
	// attention, SiLU and float-weight matmuls reproduce ("": the one native
	// to the host, as the CPU backend's default), so that OpenCL gives the
	// CPU backend's bits; Numerics.Level (the CPU's kernels) does not
	// apply here.
	Numerics numerics.Options
}

// Stats counts host↔device traffic, kernel launches and the device-memory
// traffic of those launches.
type Stats struct {
	ToDevice, FromDevice int64 // bytes
	Launches             int64
	// Moved is the bytes the launched kernels read and write in device
	// memory, each operand counted once per launch (weights, activations,
	// the cache cells a view spans): the least traffic the work needs,
	// which a GPU's memory bandwidth turns into a time floor.
	Moved int64
}

// KernelTime is one kernel's accumulated device time while profiling.
type KernelTime struct {
	Name  string
	Calls int64
	Total time.Duration
}

// compiled is a device's context and program, shared by every Backend on
// that device so that the program is built once per process. v is the
// variant built: the one asked for, less the vendor fast paths where the
// device's compiler refused them.
type compiled struct {
	ctx  cl.Context
	prog cl.Program
	v    variant
	err  error
}

// variant is how a program is built for a device (see options).
type variant struct {
	// cpu selects the kernels' CPU-device variants.
	cpu bool
	// approxDiv builds without -cl-fp32-correctly-rounded-divide-sqrt even
	// where the device offers it, so that tests cover quant.cl's fallback.
	approxDiv bool
	// intDot takes cl_khr_integer_dot_product's packed 4×8-bit dot product
	// for the integer sums (DOT4 in gemm.cl) where the device offers it.
	intDot bool
	// subgroups takes sub-group built-ins for maxima (SUBGROUPS in
	// common.cl) where the device offers cl_khr_subgroups or
	// cl_intel_subgroups.
	subgroups bool
	// fp16 takes cl_khr_fp16's conversions for the roundings to half
	// (FP16 in common.cl) where the device offers it.
	fp16 bool
}

// nativeVariant is the variant New builds for a device: its class's
// kernels and every vendor fast path it offers.
func nativeVariant(info DeviceInfo) variant {
	return variant{cpu: info.Type == "CPU", intDot: info.IntDot, subgroups: info.Subgroups, fp16: info.FP16}
}

// fastPaths reports whether v asks for a vendor fast path the device offers.
func (v variant) fastPaths(info DeviceInfo) bool {
	return v.intDot && info.IntDot || v.subgroups && info.Subgroups || v.fp16 && info.FP16
}

// portable is v without vendor fast paths.
func (v variant) portable() variant {
	v.intDot, v.subgroups, v.fp16 = false, false, false
	return v
}

// options are v's build options on a device described by info: the
// CPU-device variant (CPU_VARIANT: weights.cl, fused.cl); correctly rounded
// division where the device offers it, unless approxDiv (the activation
// quantisers in quant.cl must divide exactly as the CPU does); the fast
// paths the device offers. No fast-math: results follow the CPU backend's
// to rounding.
func (v variant) options(info DeviceInfo) string {
	opts := "-cl-std=CL1.2"
	if v.cpu {
		opts += " -DCPU_VARIANT"
	}
	if info.CorrectDivide && !v.approxDiv {
		opts += " -cl-fp32-correctly-rounded-divide-sqrt -DCORRECT_DIV"
	}
	if v.intDot && info.IntDot {
		opts += " -DDOT4_KHR"
	}
	if v.subgroups && info.Subgroups {
		opts += " -DSUBGROUPS"
	}
	if v.fp16 && info.FP16 {
		opts += " -DFP16"
	}
	return opts
}

// programKey names a program: a device and a variant.
type programKey struct {
	dev cl.Device
	v   variant
}

var programs struct {
	sync.Mutex
	m map[programKey]*compiled
}

// compile builds (or reuses) the program of variant v on d. Where the
// device's compiler refuses a vendor fast path (an extension it lists but
// does not declare in OpenCL C 1.2), the portable build serves instead.
func compile(d device, v variant) (*compiled, error) {
	programs.Lock()
	defer programs.Unlock()
	key := programKey{d.dev, v}
	if c, ok := programs.m[key]; ok {
		return c, c.err
	}
	if programs.m == nil {
		programs.m = map[programKey]*compiled{}
	}
	c := &compiled{v: v}
	c.ctx, c.err = cl.NewContext(d.dev)
	if c.err == nil {
		c.prog, c.err = buildProgram(c.ctx, d.dev, kernels.Source(), v.options(d.info))
		if c.err != nil && v.fastPaths(d.info) {
			c.v = v.portable()
			c.prog, c.err = buildProgram(c.ctx, d.dev, kernels.Source(), c.v.options(d.info))
		}
	}
	programs.m[key] = c
	return c, c.err
}

// buildProgram builds src for d with the build options opts.
func buildProgram(ctx cl.Context, d cl.Device, src, opts string) (cl.Program, error) {
	p, err := ctx.Build(d, src, opts)
	if err != nil {
		return cl.Program{}, err
	}
	return p, nil
}

// kern is a kernel with the work-group size used to launch it. It is made
// from the program on first use (Backend.made): some drivers (Mesa's
// rusticl) compile each kernel when it is made, so a model that uses a few
// weight types compiles only their kernels.
type kern struct {
	k    cl.Kernel
	name string
	ok   bool // k is made and wg, max and simd are set
	wg   int
	max  int // CL_KERNEL_WORK_GROUP_SIZE
	simd int // CL_KERNEL_PREFERRED_WORK_GROUP_SIZE_MULTIPLE
}

// made makes k on first use and reports whether it may be used; a failure
// is the backend's error.
func (b *Backend) made(k *kern) bool {
	if k.ok {
		return true
	}
	if b.err != nil {
		return false
	}
	var err error
	if k.k, err = b.prog.Kernel(k.name); err == nil {
		if k.max, err = k.k.MaxWorkGroup(b.dev); err == nil {
			k.simd, err = k.k.PreferredMultiple(b.dev)
		}
		b.live = append(b.live, k)
	}
	if err != nil {
		b.fail(fmt.Errorf("opencl: kernel %s: %w", k.name, err))
		return false
	}
	k.wg = groupSize
	for k.wg > k.max {
		k.wg /= 2
	}
	k.ok = true
	return true
}

// weightKernels are the per-type kernels of a weight format. For the block
// formats mv and mmc are quant.cl's integer kernels and quant rounds their
// activations; plain types have no quant. F16 and BF16 have round, which
// rounds their activations for mmc and mmt, and for mv on a CPU device (a
// GPU's mv rounds as it reads, see weights.cl).
type weightKernels struct {
	mv, mmc, embedding, quant, round *kern
	// mmt is the tiled GEMM of a GPU's prompts (gemm.cl); mmtR8 is Q4_0's
	// for matrices of rows a multiple of 8 (one accumulator per output).
	mmt, mmtR8 *kern
	// mvf is the block formats' fused decode matmul (fused.cl).
	mvf *kern
}

// Backend runs ops on one OpenCL device.
type Backend struct {
	info DeviceInfo
	dev  cl.Device
	ctx  cl.Context
	prog cl.Program // the device's, shared by its Backends
	v    variant    // the program's variant
	q    *cl.Queue

	byType                                               map[dtype.Type]weightKernels
	rmsNorm, argmax, siluMul, siluMulRows, add, copyKern *kern
	// copyF16 copies F16 elements; copyF32F16 rounds F32 to F16 (the
	// append to an f16 KV cache).
	copyF16, copyF32F16, copyF16F32 *kern
	rope                            *kern
	// The ops of architectures beyond Llama (arch_ops.go); geluTable is
	// ggml's F16 GELU table (ggmlmath.GELUTable), uploaded once.
	layerNorm, geluMul, addBias, scale, softCap *kern
	geluTable                                   cl.Mem
	// ropes are RoPE's cos and sin tables, one per rope (rope.go).
	ropes []*ropeTable
	// The attention kernels per cache type, indexed by kvIndex: [K] or
	// [K][V] (see attention.cl).
	attention, attentionPart [2][2]*kern
	attentionStats           [2]*kern
	attentionMerge           *kern
	// flash attention and the quantised caches' append and read-back
	// (flash.go, flash.cl, kvquant.cl).
	flashAttn, flashMerge                  *kern
	kvQuant, kvDequant, kvBF16, kvFromBF16 *kern
	// live are the kernels made so far, released by Close.
	live []*kern

	// mat holds the matmul launch shapes chosen for the device (see tune).
	mat matShape
	// gemmItems, when positive, caps mmt_T's work-groups (Options.Tune).
	gemmItems int

	// flavour is the llama.cpp CPU build whose arithmetic attention, SiLU
	// and float-weight matmuls follow, as the CPU backend's do: its vector
	// width (Lanes) and float orders (FloatOrder).
	flavour numerics.Flavour

	// chains[:nchains] are the ops held back to be fused (fuse.go); fuse,
	// on by default, lets ops be held (tests turn it off to compare).
	chains  [2]chain
	nchains int
	fuse    bool
	// mvfArgs is the arguments of the mvf_T launch being set (kept here so
	// that setArgs does not allocate).
	mvfArgs mvfArgs

	// attnScratch holds flash-decoding partials (see attendSplit), grown
	// on demand; attnParts, when positive, forces the partition count
	// (tests).
	attnScratch      cl.Mem
	attnScratchBytes int
	attnParts        int

	// act holds activations quantised for the integer matmuls (see
	// quantize); actVer numbers tensor writes (see touch).
	act    actScratch
	actVer uint64

	// moved counts Stats.Moved.
	moved int64

	// status is the kernels' bad-input report (see common.cl); checked by
	// Sync when an Embedding or Attention ran since the last check.
	status      cl.Mem
	checkStatus bool

	tensors map[*tensor]struct{}
	used    int64
	err     error
	closed  bool

	// profiling times every launch by kernel (SetProfiling); charge, when
	// not "", times them for a backend.ProfiledBackend, charged to it or to
	// a fused launch's name (TimeLaunches).
	profiling  bool
	charge     string
	pending    []pendingEvent
	profile    map[string]*KernelTime
	charged    map[string]backend.LaunchTime
	fusedNames map[[stepKinds]uint8]string
}

type pendingEvent struct {
	name, charge string
	ev           cl.Event
}

// groupSize is the work-group size of every launch: a power of two (the
// reductions need one) that every current GPU runs well.
const groupSize = 64

// attChunk must match ATT_CHUNK in attention.cl.
const attChunk = 256

// The status codes of common.cl.
const (
	statusBadID    = 1
	statusBadSeq   = 2
	statusBadRange = 3
)

var weightTypes = []struct {
	dt     dtype.Type
	suffix string
}{
	{dtype.F32, "f32"}, {dtype.F16, "f16"}, {dtype.BF16, "bf16"},
	{dtype.Q8_0, "q8_0"}, {dtype.Q4_0, "q4_0"}, {dtype.Q6_K, "q6_k"},
	{dtype.Q4_1, "q4_1"}, {dtype.Q5_0, "q5_0"}, {dtype.Q5_1, "q5_1"},
	{dtype.Q2_K, "q2_k"}, {dtype.Q3_K, "q3_k"}, {dtype.Q4_K, "q4_k"}, {dtype.Q5_K, "q5_k"},
	{dtype.IQ4_NL, "iq4_nl"}, {dtype.IQ4_XS, "iq4_xs"},
}

// New opens the selected device and builds (or reuses) the kernel program.
func New(opts Options) (*Backend, error) {
	ds, err := devices()
	if err != nil {
		return nil, err
	}
	t, err := parseTune(opts.Tune)
	if err != nil {
		return nil, err
	}
	f, err := numerics.ParseFlavour(opts.Numerics.Flavour, numerics.HostCPU())
	if err != nil {
		return nil, fmt.Errorf("opencl: %w", err)
	}
	d, err := pick(ds, opts.Device)
	if err != nil {
		return nil, err
	}
	b, err := open(d, t.apply(nativeVariant(d.info)), f)
	if err != nil {
		return nil, err
	}
	b.gemmItems = t.gemmItems
	return b, nil
}

// open makes a Backend on d with the program variant v and, for v.cpu, the
// CPU launch shapes (else the GPU ones), in flavour f's arithmetic.
func open(d device, v variant, f numerics.Flavour) (*Backend, error) {
	c, err := compile(d, v)
	if err != nil {
		return nil, fmt.Errorf("opencl: device %q: %w", d.info.Name, err)
	}
	b := &Backend{info: d.info, dev: d.dev, ctx: c.ctx, prog: c.prog, v: c.v, tensors: map[*tensor]struct{}{}, byType: map[dtype.Type]weightKernels{}, fuse: true, flavour: f}
	if err := b.init(v.cpu); err != nil {
		b.release()
		return nil, fmt.Errorf("opencl: device %q: %w", d.info.Name, err)
	}
	return b, nil
}

func (b *Backend) init(cpu bool) error {
	var err error
	if b.q, err = b.ctx.NewQueue(b.dev); err != nil {
		return err
	}
	mk := func(name string) *kern { return &kern{name: name} }
	quant := map[dtype.Type]*kern{dtype.Q8_0: mk("quantize_q8_0"), dtype.Q8_1: mk("quantize_q8_1"), dtype.Q8_K: mk("quantize_q8_k")}
	for _, wt := range weightTypes {
		q := "" // the integer kernels of quant.cl
		if wt.dt.Quantized() {
			q = "q"
		}
		sfx := q + "_" + wt.suffix
		wk := weightKernels{mv: mk("mv" + sfx), mmc: mk("mmc" + sfx), mmt: mk("mmt_" + wt.suffix), embedding: mk("embedding_" + wt.suffix), quant: quant[wt.dt.ActivationType()]}
		if wt.dt == dtype.Q4_0 {
			wk.mmtR8 = mk("mmt_r8_q4_0")
		}
		if wt.dt == dtype.F16 || wt.dt == dtype.BF16 {
			wk.round = mk("round_act_" + wt.suffix)
		}
		if wt.dt.Quantized() {
			wk.mvf = mk("mvf_" + wt.suffix)
		}
		b.byType[wt.dt] = wk
	}
	b.rmsNorm, b.argmax = mk("rms_norm"), mk("argmax")
	b.siluMul, b.siluMulRows, b.add, b.copyKern = mk("silu_mul"), mk("silu_mul_rows"), mk("add"), mk("copy")
	b.copyF16, b.copyF32F16, b.copyF16F32 = mk("copy_f16"), mk("copy_f32_f16"), mk("copy_f16_f32")
	b.rope, b.attentionMerge = mk("rope"), mk("attention_merge")
	b.flashAttn, b.flashMerge = mk("flash_attn"), mk("flash_merge")
	b.kvQuant, b.kvDequant, b.kvBF16, b.kvFromBF16 = mk("kv_quant"), mk("kv_dequant"), mk("kv_bf16"), mk("kv_from_bf16")
	b.layerNorm, b.geluMul, b.addBias = mk("layer_norm"), mk("gelu_mul"), mk("add_bias")
	b.scale, b.softCap = mk("scale"), mk("soft_cap")
	caches := [2]string{"f32", "f16"}
	for ki, kn := range caches {
		b.attentionStats[ki] = mk("attention_stats_" + kn)
		for vi, vn := range caches {
			b.attention[ki][vi] = mk("attention_" + kn + "_" + vn)
			b.attentionPart[ki][vi] = mk("attention_part_" + kn + "_" + vn)
		}
	}
	mv, mmc := b.byType[dtype.Q4_0].mv, b.byType[dtype.Q4_0].mmc
	if !b.made(mv) || !b.made(mmc) {
		return b.err
	}
	b.mat = tune(cpu, b.info.ComputeUnits, mv, mmc)
	if b.status, err = b.ctx.NewBuffer(8); err != nil {
		return err
	}
	if err = b.uploadGELUTable(); err != nil {
		return err
	}
	if err = b.q.Zero(b.status, 8); err != nil {
		return err
	}
	return b.q.Finish()
}

// Name is "opencl".
func (b *Backend) Name() string { return "opencl" }

// Device is the device's name.
func (b *Backend) Device() string { return b.info.Name }

// Info describes the device in use.
func (b *Backend) Info() DeviceInfo { return b.info }

// Stats returns the traffic and launches since New or ResetStats.
func (b *Backend) Stats() Stats {
	b.flush()
	to, from, l := b.q.Counters()
	return Stats{ToDevice: to, FromDevice: from, Launches: l, Moved: b.moved}
}

// ResetStats zeroes Stats and the kernel profile.
func (b *Backend) ResetStats() {
	b.flush()
	b.q.ResetCounters()
	b.moved = 0
	b.profile = nil
}

// SetProfiling turns per-kernel timing on or off. While on, every launch
// carries an event whose device time Sync adds to Profile; it costs a little
// host time per launch.
func (b *Backend) SetProfiling(on bool) {
	b.flush()
	if !on {
		b.collect()
	}
	b.profiling = on
}

// TimeLaunches charges the device time of the launches queued from now on
// to kind, and a fused launch's to its own name ("fused:norm+matmul×3+
// rope×2+copy×2", the ops it runs), until the next call; "" stops. Nothing
// held is launched for it, so that a backend.ProfiledBackend, which sets
// the kind of each op it forwards, leaves the fusing as it is
// (backend.LaunchTimer).
func (b *Backend) TimeLaunches(kind string) { b.charge = kind }

// LaunchTimes waits for queued work and returns, and forgets, the device
// time and launches charged to each name (TimeLaunches).
func (b *Backend) LaunchTimes() map[string]backend.LaunchTime {
	b.flush()
	b.collect()
	out := b.charged
	b.charged = nil
	return out
}

// Profile returns the accumulated device time per kernel of every timed
// launch (SetProfiling, TimeLaunches), largest first, after waiting for
// queued work.
func (b *Backend) Profile() []KernelTime {
	b.flush()
	b.collect()
	out := make([]KernelTime, 0, len(b.profile))
	for _, kt := range b.profile {
		out = append(out, *kt)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Total != out[j].Total {
			return out[i].Total > out[j].Total
		}
		return out[i].Name < out[j].Name
	})
	return out
}

// collect waits for the queue and folds pending events into the profile.
func (b *Backend) collect() {
	if len(b.pending) == 0 {
		return
	}
	if err := b.q.Finish(); err != nil {
		b.fail(err)
	}
	if b.profile == nil {
		b.profile = map[string]*KernelTime{}
	}
	for _, p := range b.pending {
		start, end, err := p.ev.Times()
		p.ev.Release()
		if err != nil {
			b.fail(fmt.Errorf("%s: %w", p.name, err))
			continue
		}
		kt := b.profile[p.name]
		if kt == nil {
			kt = &KernelTime{Name: p.name}
			b.profile[p.name] = kt
		}
		kt.Calls++
		kt.Total += time.Duration(end - start)
		if p.charge != "" {
			if b.charged == nil {
				b.charged = map[string]backend.LaunchTime{}
			}
			lt := b.charged[p.charge]
			lt.Launches++
			lt.Total += time.Duration(end - start)
			b.charged[p.charge] = lt
		}
	}
	b.pending = b.pending[:0]
}

func (b *Backend) fail(err error) {
	if b.err == nil {
		b.err = err
	}
}

// Err returns the first recorded error without waiting (after queueing
// what the backend holds, whose launch may fail).
func (b *Backend) Err() error {
	b.flush()
	return b.err
}

// Sync waits for queued work and returns the first error. Token ids out of
// range in Embedding are found on the device and surface here.
func (b *Backend) Sync() error {
	if b.closed {
		return b.closedErr()
	}
	b.flush()
	if err := b.q.Finish(); err != nil {
		b.fail(err)
	}
	b.collect()
	if b.checkStatus && b.err == nil {
		b.checkStatus = false
		var st [2]int32
		if err := b.q.Read(b.status, 0, 8, ptr(st[:])); err != nil {
			b.fail(err)
		} else {
			switch st[0] {
			case statusBadID:
				b.fail(fmt.Errorf("opencl: Embedding: token id %d out of range", st[1]))
			case statusBadSeq:
				b.shape("Attention", "row %d: sequence id outside 0…63", st[1])
			case statusBadRange:
				b.shape("Attention", "row %d: cell range reversed or outside the view [Lo, Hi)", st[1])
			}
		}
	}
	return b.err
}

func (b *Backend) closedErr() error {
	if b.err != nil {
		return b.err
	}
	return errors.New("opencl: backend is closed")
}

// Close waits for queued work and releases every tensor and the queue; the
// device's program stays built for the next Backend. It returns an error
// only when the device failed in work not yet synced: an op's recorded error
// was already reported by Err and Sync.
func (b *Backend) Close() error {
	if b.closed {
		return nil
	}
	var err error
	if b.err == nil {
		err = b.Sync()
	}
	b.release()
	b.closed = true
	return err
}

func (b *Backend) release() {
	for _, p := range b.pending {
		p.ev.Release()
	}
	b.pending = nil
	for t := range b.tensors {
		t.mem.Release()
		t.freed = true
	}
	b.tensors = nil
	for _, k := range b.live {
		k.k.Release()
	}
	b.live = nil
	b.status.Release()
	b.geluTable.Release()
	for _, t := range b.ropes {
		t.mem.Release()
	}
	b.ropes = nil
	b.attnScratch.Release()
	b.act.q.Release()
	b.act.d.Release()
	if b.q != nil {
		b.q.Release()
	}
}

var _ backend.Backend = (*Backend)(nil)
