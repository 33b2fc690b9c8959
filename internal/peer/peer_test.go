package peer_test

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/glint-llm/glint"
	"github.com/glint-llm/glint/backend/opencl"
	"github.com/glint-llm/glint/engine"
	"github.com/glint-llm/glint/internal/cltest"
	"github.com/glint-llm/glint/internal/peer"
	"github.com/glint-llm/glint/internal/shared"
	"github.com/glint-llm/glint/model/synth"
	"github.com/glint-llm/glint/numerics"
	"github.com/glint-llm/glint/sample"
)

// peerFiles are the staged files of the fidelity issue: stories260K (real
// weights; its Q8_0/Q4_0 keep a 172-wide F16 ffn_down), llama3-tiny, and
// the K-quant files glint reads.
var peerFiles = []string{
	"stories260K/stories260K.gguf", "stories260K/stories260K-Q8_0.gguf", "stories260K/stories260K-Q4_0.gguf",
	"llama3-tiny/llama3-tiny-F16.gguf", "llama3-tiny/llama3-tiny-Q8_0.gguf", "llama3-tiny/llama3-tiny-Q4_0.gguf",
	"kquants/kq-small-F16.gguf", "kquants/kq-small-Q6_K.gguf",
	"kquants/kq-small-Q2_K.gguf", "kquants/kq-small-Q3_K_S.gguf", "kquants/kq-small-Q3_K_M.gguf", "kquants/kq-small-Q3_K_L.gguf",
	"kquants/kq-small-Q4_K_S.gguf", "kquants/kq-small-Q4_K_M.gguf", "kquants/kq-small-Q5_K_S.gguf", "kquants/kq-small-Q5_K_M.gguf",
	"kquants/kq-small-Q4_1.gguf", "kquants/kq-small-Q5_0.gguf", "kquants/kq-small-Q5_1.gguf",
	"kquants/kq-small-IQ4_NL.gguf", "kquants/kq-small-IQ4_XS.gguf",
}

// knownGaps are the runs that miss the 95% bar today, with why: each is a
// rounding-boundary flip (an activation on an 8-bit or f16 step) after a
// last-bit difference in a float sum whose order glint does not yet take
// from ggml. There only the argmax check applies; a listed run that meets
// the bar fails the test, so that the list cannot go stale. It holds on
// AVX2 and AVX-512 hosts alike: on each, the CPU backend's attention and
// SiLU follow the llama.cpp build native to the host and OpenCL gives the
// CPU's bits (backend/cpu/flavor.go), so what remains is in ops that no
// flavour touches. Measured on AVX2 and Zen 4 (AVX-512) hosts. The last
// AVX-512 entries, stories260K's F32 weights over an f16 cache (75% of
// steps within 2e-3), were ggml_vec_dot_f32's remainder, whose products
// that build rounds in whole groups of 8, and a prompt's last layer, whose
// feed-forward llama.cpp runs on the output rows only.
var knownGaps = map[string]string{
	// Empty. The last entry, llama3-tiny-F16 over an f32 cache on OpenCL
	// (83% of steps within 2e-3), was prefill on a CPU device summing F16
	// weights in 16 lanes of its own (mmc_T), not llama.cpp's tinyBLAS
	// order: keys and values an ulp off reach the scores unrounded.
}

// TestTeacherForcedVsLlamaCpp compares glint's logits with llama.cpp's,
// the peer forced along glint's greedy ids, on every staged file with both
// engines at their defaults (f16 KV cache) and both at f32, on the CPU and
// on every OpenCL device.
//
// The bar is the fidelity issue's: at least 95% of steps with max |Δlogit|
// ≤ 2e-3 (float32 sums in another order leave ~1e-6; an activation that
// lands on a rounding boundary of Q8_0 or f16 can move a step further), no
// systematic shift (the mean signed difference stays below 1e-3), and
// glint's argmax equal to llama.cpp's except at a near-tie (gap < 0.05).
// The runs in knownGaps are held to the argmax check only.
func TestTeacherForcedVsLlamaCpp(t *testing.T) {
	dir, err := peer.Find()
	if err != nil {
		t.Skip(err)
	}
	prompt := "Sam found a shiny"
	const steps = 24
	for _, rel := range peerFiles {
		path := shared.Models(t, rel)
		for _, be := range peerBackends(t) {
			for _, ct := range []string{"f16", "f32"} {
				name := fmt.Sprintf("%s/%s/%s", rel, be.backend, ct)
				t.Run(fmt.Sprintf("%s/%s/%s", rel, be.name, ct), func(t *testing.T) {
					within, mean, _ := forcedVsPeer(t, dir, path, prompt, be, peer.KV{K: ct, V: ct}, steps)
					holdToBar(t, within, mean, knownGaps, name)
				})
			}
		}
	}
}

// peerRun is a backend the peer tests run glint on: "cpu", or "opencl" on
// one device (name "opencl-DEVICE"); the known gaps name its backend.
type peerRun struct{ name, backend, device string }

// peerBackends are the CPU and every OpenCL device (internal/cltest).
func peerBackends(t *testing.T) []peerRun {
	runs := []peerRun{{"cpu", "cpu", ""}}
	if _, err := opencl.Devices(); err == nil {
		for _, d := range cltest.Devices(t) {
			runs = append(runs, peerRun{"opencl-" + d.ShortName(), "opencl", strconv.Itoa(d.Index)})
		}
	}
	return runs
}

// forcedVsPeer runs glint greedily on path (backend be, both KV caches ct)
// for steps steps from prompt, runs llama.cpp forced along glint's ids, and
// returns the share of steps within 2e-3 and the mean signed difference,
// failing t where glint's argmax differs from llama.cpp's beyond a
// near-tie (gap < 0.05).
func forcedVsPeer(t *testing.T, dir, path, prompt string, be peerRun, kv peer.KV, steps int) (within, mean, worst float64) {
	t.Helper()
	fa := "off"
	if kv.Flash {
		fa = "on"
	}
	m, err := glint.Open(path, glint.Options{Backend: be.backend, Device: be.device, Context: 256, CacheTypeK: kv.K, CacheTypeV: kv.V,
		FlashAttn: fa, Numerics: numerics.FromEnv()})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	ids := m.Tokenizer.Encode(prompt, true)
	rows, force := make([][]float32, 0, steps), make([]int32, 0, steps)
	batch := ids
	s, err := m.NewSession(engine.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for range steps {
		if err := s.Prefill(t.Context(), batch); err != nil {
			t.Fatal(err)
		}
		row := make([]float32, m.Vocab())
		if err := s.Logits(t.Context(), row); err != nil {
			t.Fatal(err)
		}
		best := sample.Argmax(row)
		rows, force, batch = append(rows, row), append(force, best), []int32{best}
	}
	ref, err := peer.Forced(dir, path, ids, force, kv, m.Vocab())
	if err != nil {
		t.Fatal(err)
	}
	st, err := peer.Compare(rows, ref)
	if err != nil {
		t.Fatal(err)
	}
	var diffs []string
	for i, s := range st {
		worst, mean = math.Max(worst, s.MaxDiff), mean+s.MeanDiff/float64(len(st))
		diffs = append(diffs, fmt.Sprintf("%.2g", s.MaxDiff))
		if s.Top != s.PeerTop && s.Gap >= 0.05 {
			t.Errorf("step %d: glint's argmax %d, llama.cpp's %d with a gap of %.3g", i, s.Top, s.PeerTop, s.Gap)
		}
	}
	within = peer.Within(st, 2e-3)
	t.Logf("%.0f%% of steps within 2e-3, worst %.3g, mean shift %.2g; per step: %s", 100*within, worst, mean, strings.Join(diffs, " "))
	return within, mean, worst
}

// archGaps are the architecture runs that miss the bar, with why; as for
// knownGaps, only the argmax check applies, and a listed run that meets the
// bar fails the test. None today, on AVX2 and AVX-512 hosts: OpenCL's tanh
// in Gemma 2's attention soft cap still differs from glibc's tanhf in the
// last bit, but with the rest of OpenCL's attention giving the CPU's bits
// (under either flavour, GLINT_GGML_FLAVOR) its logits stay within 2e-7.
var archGaps = map[string]string{}

// TestArchitecturesVsLlamaCpp holds the architectures llama.cpp c392e509
// reads (Qwen 2, Phi-3, Gemma 2, GPT-2) to the same bar as the staged
// Llama files: synthetic models at std 0.05 (at 0.2 small random models
// are chaotic: one int8 or f16 rounding flip moves logits by 0.1–0.6), in
// F32 and in Q4_0 (llama-quantize's mix), 24 steps from "Sam found a
// shiny" (past the sliding window of 8 of Phi-3 and Gemma 2), each engine
// at its defaults (an f16 KV cache), on the CPU and every OpenCL device.
func TestArchitecturesVsLlamaCpp(t *testing.T) {
	dir, err := peer.Find()
	if err != nil {
		t.Skip(err)
	}
	tmp := t.TempDir()
	for _, arch := range []string{"qwen2", "phi3", "gemma2", "gpt2"} {
		shape := "tiny"
		if arch == "gemma2" {
			shape = "gemma2-tiny"
		}
		for _, typ := range []string{"F32", "Q4_0"} {
			path := filepath.Join(tmp, arch+"-"+typ+".gguf")
			if err := synth.WriteGGUF(path, synth.Options{Arch: arch, Shape: shape, Type: typ, Seed: 3, Std: 0.05}); err != nil {
				t.Fatal(err)
			}
			for _, be := range peerBackends(t) {
				name := fmt.Sprintf("%s/%s/%s", arch, typ, be.backend)
				t.Run(fmt.Sprintf("%s/%s/%s", arch, typ, be.name), func(t *testing.T) {
					within, mean, _ := forcedVsPeer(t, dir, path, "Sam found a shiny", be, peer.KV{}, 24)
					holdToBar(t, within, mean, archGaps, name)
				})
			}
		}
	}
}

// TestBF16VsLlamaCpp holds a BF16 file (a synthetic Llama of the "small"
// shape, whose 256- and 512-wide rows take several of vdpbf16ps's 64-element
// steps) to llama.cpp's logits to the bit on the CPU, over an f16 cache,
// where glint gives the arithmetic of the build native to the host
// (numerics.Host.Flavour): on a host with AVX512_BF16 that build sums BF16 by
// vdpbf16ps, which widening the values to float misses by up to 0.04 on a
// 1B file. OpenCL devices are held to the bar.
func TestBF16VsLlamaCpp(t *testing.T) {
	dir, err := peer.Find()
	if err != nil {
		t.Skip(err)
	}
	if numerics.FromEnv().Flavour != "" {
		t.Skip("GLINT_GGML_FLAVOR is set: the peer is the host's native build")
	}
	path := filepath.Join(t.TempDir(), "small-BF16.gguf")
	if err := synth.WriteGGUF(path, synth.Options{Shape: "small", Type: "BF16", Seed: 3, Std: 0.05}); err != nil {
		t.Fatal(err)
	}
	for _, be := range peerBackends(t) {
		t.Run(be.name, func(t *testing.T) {
			within, mean, worst := forcedVsPeer(t, dir, path, "Sam found a shiny", be, peer.KV{}, 24)
			if be.backend == "cpu" && worst != 0 {
				t.Errorf("%v arithmetic: logits up to %.3g from llama.cpp's, want its bits", numerics.HostCPU().Flavour(), worst)
			}
			holdToBar(t, within, mean, nil, be.name)
		})
	}
}

// holdToBar fails t unless at least 95% of the steps were within 2e-3 and
// the mean signed difference stays below 1e-3; a run listed in gaps is held
// to the argmax check only, and fails if it meets the bar (so that the list
// cannot go stale).
func holdToBar(t *testing.T, within, mean float64, gaps map[string]string, name string) {
	t.Helper()
	if why, known := gaps[name]; known {
		if within >= 0.95 && math.Abs(mean) <= 1e-3 {
			t.Errorf("meets the bar now: remove it from the known gaps (%s)", why)
		}
		return
	}
	if within < 0.95 {
		t.Errorf("only %.0f%% of steps within 2e-3 of llama.cpp (95%% needed)", 100*within)
	}
	if math.Abs(mean) > 1e-3 {
		t.Errorf("mean signed difference %.3g: a systematic shift", mean)
	}
}

// TestQuantizedCacheVsLlamaCpp holds glint's flash attention over quantised
// KV caches to the fidelity bar against llama.cpp's (both with -fa, both
// with the same -ctk/-ctv) on kq-small-F16, and on the files
// GLINT_PEER_FILES names (a list separated by the OS's path separator, e.g.
// the 1B-shaped Q4_0 file of scripts/llama3.2-1b.sh), on the CPU and every
// OpenCL device: q8_0 and q4_0 caches, K and V alike, a q8_0 K over an f16
// V, and flash attention over the default f16 cache. Against a peer built
// for the flavour glint takes (GLINT_GGML_FLAVOR=avx2 with an AVX2 build)
// the CPU's logits are llama.cpp's to the bit.
func TestQuantizedCacheVsLlamaCpp(t *testing.T) {
	dir, err := peer.Find()
	if err != nil {
		t.Skip(err)
	}
	paths := []string{shared.Models(t, "kquants/kq-small-F16.gguf")}
	if extra := os.Getenv("GLINT_PEER_FILES"); extra != "" {
		paths = append(paths, filepath.SplitList(extra)...)
	}
	for _, path := range paths {
		for _, be := range peerBackends(t) {
			for _, kv := range []peer.KV{{K: "q8_0", V: "q8_0", Flash: true}, {K: "q4_0", V: "q4_0", Flash: true},
				{K: "f16", V: "f16", Flash: true}, {K: "q8_0", V: "f16", Flash: true}, {K: "f16", V: "f16"}} {
				name := kv.K + "-" + kv.V
				if kv.Flash {
					name += "-fa"
				}
				t.Run(filepath.Base(path)+"/"+be.name+"/"+name, func(t *testing.T) {
					within, mean, _ := forcedVsPeer(t, dir, path, "Sam found a shiny", be, kv, 24)
					t.Logf("%.0f%% of 24 steps within 2e-3, mean difference %.3g", 100*within, mean)
					holdToBar(t, within, mean, nil, "")
				})
			}
		}
	}
}
