package report

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/glint-llm/glint"
	"github.com/glint-llm/glint/model/gguf"
	"github.com/glint-llm/glint/model/safetensors"
	"github.com/glint-llm/glint/numerics"
)

// Options describe a report.
type Options struct {
	// Backends are measured in this order.
	Backends []string
	// Models maps a backend name to its model; the "" entry is the model of
	// every backend without its own. ONNX needs an ONNX model directory,
	// so it never falls back to a GGUF file.
	Models map[string]string
	// Prompt is tokenized by each model's tokenizer, unless PromptIDs is set.
	Prompt    string
	PromptIDs []int32
	// N tokens are generated per run (at least 2); Runs timed runs follow
	// one warm-up run.
	N, Runs int
	Threads int
	Device  string // OpenCL device
	Tune    string // OpenCL kernels' tuning (glint.Options.Tune)
	// Numerics is the kernel level and llama.cpp flavour (glint.Options.Numerics).
	Numerics numerics.Options
	Context  int // KV-cache length (0: the model's trained context)
	// CacheTypeK and CacheTypeV are the KV-cache types ("": f16).
	CacheTypeK, CacheTypeV string
	// FlashAttn is -fa: on, off or auto ("": auto).
	FlashAttn string
	OrtLib    string
	// Profile adds Runs more runs per backend with per-op timing
	// (backend.Profiled), kept apart from the timed runs.
	Profile bool
	// Spec is the speculative decoding of every backend (glint.Options.Spec).
	Spec glint.SpecOptions
	// Progress, when set), is told as each backend starts.
	Progress func(backend string, i, n int)
}

func (o Options) check() error {
	if len(o.Backends) == 0 {
		return fmt.Errorf("report: no backends")
	}
	seen := map[string]bool{}
	for _, b := range o.Backends {
		if !slices.Contains(glint.Backends, b) {
			return fmt.Errorf("report: unknown backend %q (want %s)", b, strings.Join(glint.Backends, ", "))
		}
		if seen[b] {
			return fmt.Errorf("report: backend %q named twice", b)
		}
		seen[b] = true
	}
	for k := range o.Models {
		if k != "" && !slices.Contains(o.Backends, k) {
			return fmt.Errorf("report: model given for %q, which is not among the backends %v", k, o.Backends)
		}
	}
	switch {
	case o.N < 2:
		return fmt.Errorf("report: -n %d: generate at least 2 tokens (TBT is the time between them)", o.N)
	case o.Runs < 1:
		return fmt.Errorf("report: --runs %d: need at least 1", o.Runs)
	case o.Prompt == "" && len(o.PromptIDs) == 0:
		return fmt.Errorf("report: empty prompt")
	}
	return nil
}

// Run measures every backend with run and assembles the report. Its error
// is about the options only: a backend that fails is a row saying why.
func Run(ctx context.Context, o Options, run Runner) (*Report, error) {
	if err := o.check(); err != nil {
		return nil, err
	}
	for _, t := range []*string{&o.CacheTypeK, &o.CacheTypeV} {
		if *t == "" {
			*t = "f16"
		}
	}
	if run == nil {
		return nil, errNoRunner
	}
	r := &Report{
		SchemaVersion: SchemaVersion,
		Created:       time.Now().UTC().Truncate(time.Second),
		Machine:       machine(),
		Settings: Settings{
			Prompt: o.Prompt, PromptIDs: o.PromptIDs, NPredict: o.N, Runs: o.Runs, WarmupRuns: 1,
			Threads: o.Threads, Device: o.Device, Tune: o.Tune, Context: o.Context, CacheTypeK: o.CacheTypeK, CacheTypeV: o.CacheTypeV,
			FlashAttn: o.FlashAttn, Sampling: "greedy", IgnoreEOS: true, Profile: o.Profile, Speculative: specSettings(o.Spec),
		},
	}
	infos := map[string]ModelInfo{}
	for i, name := range o.Backends {
		if o.Progress != nil {
			o.Progress(name, i, len(o.Backends))
		}
		path, ok := o.Models[name]
		if !ok && name != "onnx" {
			path = o.Models[""]
		}
		b := Backend{Backend: name, Model: ModelInfo{Path: path}, NPredict: o.N, Runs: o.Runs}
		if err := ctx.Err(); err != nil {
			b.Status, b.Reason = StatusSkipped, "interrupted: "+err.Error()
			r.Backends = append(r.Backends, b)
			continue
		}
		if path == "" {
			b.Status, b.Reason = StatusSkipped, fmt.Sprintf("no model for %s (give -m %s=PATH)", name, name)
			r.Backends = append(r.Backends, b)
			continue
		}
		info, seen := infos[path]
		if !seen {
			var err error
			if info, err = describeModel(path); err != nil {
				b.Status, b.Reason = StatusFailed, err.Error()
				r.Backends = append(r.Backends, b)
				continue
			}
			infos[path] = info
		}
		b = run(ctx, Job{
			Backend: name, Model: path, Prompt: o.Prompt, PromptIDs: o.PromptIDs, N: o.N, Runs: o.Runs,
			Threads: o.Threads, Device: o.Device, Tune: o.Tune, Context: o.Context, CacheTypeK: o.CacheTypeK, CacheTypeV: o.CacheTypeV, FlashAttn: o.FlashAttn, OrtLib: o.OrtLib, Profile: o.Profile,
			Numerics: o.Numerics, Spec: o.Spec,
		})
		b.Backend, b.Model = name, info
		if b.Status == StatusOK {
			b.Summary = summarize(&b)
		}
		r.Backends = append(r.Backends, b)
	}
	return r, nil
}

// machine describes this computer.
func machine() Machine {
	return Machine{
		Hostname: hostname(), OS: runtime.GOOS, Arch: runtime.GOARCH,
		CPUModel: cpuModel(), Cores: runtime.NumCPU(), GoVersion: runtime.Version(),
	}
}

// cpuModel is /proc/cpuinfo's first model name ("" where there is none).
func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// ftypeNames are llama.cpp's names for general.file_type (enum llama_ftype).
var ftypeNames = map[uint64]string{
	0: "ALL_F32", 1: "MOSTLY_F16", 2: "MOSTLY_Q4_0", 3: "MOSTLY_Q4_1", 7: "MOSTLY_Q8_0",
	8: "MOSTLY_Q5_0", 9: "MOSTLY_Q5_1", 10: "MOSTLY_Q2_K", 11: "MOSTLY_Q3_K_S", 12: "MOSTLY_Q3_K_M",
	13: "MOSTLY_Q3_K_L", 14: "MOSTLY_Q4_K_S", 15: "MOSTLY_Q4_K_M", 16: "MOSTLY_Q5_K_S",
	17: "MOSTLY_Q5_K_M", 18: "MOSTLY_Q6_K", 32: "MOSTLY_BF16",
}

// describeModel identifies a model file or directory: digest, size, format
// and storage types.
func describeModel(path string) (ModelInfo, error) {
	info := ModelInfo{Path: path}
	st, err := os.Stat(path)
	if err != nil {
		return info, fmt.Errorf("model: %w", err)
	}
	if !st.IsDir() {
		if info.SHA256, info.Bytes, err = hashFile(path); err != nil {
			return info, fmt.Errorf("model %s: %w", path, err)
		}
		f, err := gguf.Open(path)
		if err != nil {
			return info, fmt.Errorf("model: %w", err)
		}
		defer f.Close()
		info.Format = "gguf"
		if ft, err := f.Uint("general.file_type"); err == nil {
			if n, ok := ftypeNames[ft]; ok {
				info.FileType = n
			} else {
				info.FileType = fmt.Sprintf("ftype(%d)", ft)
			}
		}
		info.TensorTypes = map[string]int{}
		for _, t := range f.Tensors {
			info.TensorTypes[t.Type.String()]++
		}
		return info, nil
	}
	if info.SHA256, info.Bytes, err = hashDir(path); err != nil {
		return info, fmt.Errorf("model %s: %w", path, err)
	}
	if s, err := safetensors.OpenDir(path); err == nil {
		defer s.Close()
		info.Format = "safetensors"
		info.TensorTypes = map[string]int{}
		for _, f := range s.Files {
			for _, t := range f.Tensors {
				info.TensorTypes[t.Type.String()]++
			}
		}
	} else if onnxFiles, _ := filepath.Glob(filepath.Join(path, "*.onnx")); len(onnxFiles) > 0 {
		info.Format = "onnx"
	}
	return info, nil
}

func hashFile(path string) (string, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return "", 0, err
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
}

// hashDir digests the sorted lines "rel<TAB>sha256\n" of every regular file
// under dir, so that a renamed, added or changed file changes the digest.
func hashDir(dir string) (string, int64, error) {
	var lines []string
	var total int64
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		sum, n, err := hashFile(p)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		lines = append(lines, filepath.ToSlash(rel)+"\t"+sum+"\n")
		total += n
		return nil
	})
	if err != nil {
		return "", 0, err
	}
	slices.Sort(lines)
	h := sha256.New()
	for _, l := range lines {
		io.WriteString(h, l)
	}
	return hex.EncodeToString(h.Sum(nil)), total, nil
}

// specSettings records the speculative decoding o asks for; nil when none
// (no draft model, and no --spec-type or "none").
func specSettings(o glint.SpecOptions) *SpecSettings {
	typ := o.Type
	switch {
	case typ == "" && o.DraftModel != "":
		typ = "draft"
	case typ == "" || typ == "none":
		return nil
	}
	return &SpecSettings{Type: typ, DraftModel: o.DraftModel, DraftMax: o.DraftMax, DraftMin: o.DraftMin, DraftPMin: o.DraftPMin,
		NgramN: o.NgramN, NgramM: o.NgramM, NgramMin: o.NgramMin, Adaptive: o.Adaptive}
}
