package quant_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/glint-llm/glint/dtype"
	"github.com/glint-llm/glint/internal/shared"
	"github.com/glint-llm/glint/model/gguf"
	"github.com/glint-llm/glint/model/quant"
	"github.com/glint-llm/glint/model/synth"
)

// staged are the targets shared/models/kquants holds llama-quantize's
// output of kq-small-F16.gguf for (MANIFEST section 12).
var staged = []string{"Q4_1", "Q5_0", "Q5_1", "Q2_K", "Q3_K_S", "Q3_K_M", "Q3_K_L", "Q4_K_S", "Q4_K_M",
	"Q5_K_S", "Q5_K_M", "Q6_K", "IQ4_NL", "IQ4_XS"}

func quantize(t *testing.T, in, typ string) string {
	t.Helper()
	ft, err := quant.LookupFileType(typ)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), typ+".gguf")
	if err := quant.Quantize(in, out, ft, quant.Options{}); err != nil {
		t.Fatal(err)
	}
	return out
}

// sameFile compares two GGUF files: identical bytes, or else each tensor's
// type and data and the metadata are compared to say what differs.
func sameFile(t *testing.T, got, want string) {
	t.Helper()
	a, err := os.ReadFile(got)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(want)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(a, b) {
		return
	}
	g, err := gguf.Parse(a)
	if err != nil {
		t.Fatal(err)
	}
	w, err := gguf.Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	if len(g.Tensors) != len(w.Tensors) {
		t.Errorf("%d tensors, llama-quantize wrote %d", len(g.Tensors), len(w.Tensors))
	}
	for i, wt := range w.Tensors {
		gd, gt, err := g.TensorData(wt.Name)
		if err != nil {
			t.Errorf("%v", err)
			continue
		}
		wd, _, _ := w.TensorData(wt.Name)
		switch {
		case gt.Type != wt.Type:
			t.Errorf("%s: type %v, llama-quantize %v", wt.Name, gt.Type, wt.Type)
		case !bytes.Equal(gd, wd):
			t.Errorf("%s (%v): data differ", wt.Name, wt.Type)
		case i < len(g.Tensors) && g.Tensors[i].Name != wt.Name:
			t.Errorf("tensor %d is %s, llama-quantize wrote %s", i, g.Tensors[i].Name, wt.Name)
		}
	}
	if len(g.KV) != len(w.KV) {
		t.Errorf("%d metadata pairs, llama-quantize wrote %d", len(g.KV), len(w.KV))
	}
	for i := range min(len(g.KV), len(w.KV)) {
		if gk, wk := g.KV[i], w.KV[i]; gk.Key != wk.Key || gk.Value.String() != wk.Value.String() {
			t.Errorf("metadata %d: %s = %v, llama-quantize %s = %v", i, gk.Key, gk.Value, wk.Key, wk.Value)
		}
	}
	if !t.Failed() {
		t.Errorf("files differ in layout (padding or offsets)")
	}
}

// TestQuantizeMatchesLlamaQuantize: quantising kq-small-F16 to each staged
// target gives llama-quantize's file, byte for byte: the same metadata,
// tensor order, per-tensor types (the mix rules) and data (the quantisers).
func TestQuantizeMatchesLlamaQuantize(t *testing.T) {
	in := shared.Models(t, "kquants/kq-small-F16.gguf")
	for _, typ := range staged {
		t.Run(typ, func(t *testing.T) {
			sameFile(t, quantize(t, in, typ), shared.Models(t, "kquants/kq-small-"+typ+".gguf"))
		})
	}
}

// llamaQuantize is the peer's llama-quantize (a measuring instrument, not a
// dependency), or "" when this checkout has none built.
func llamaQuantize() string {
	p := os.Getenv("GLINT_LLAMA_QUANTIZE")
	if p == "" {
		// The test runs in model/quant; the peer is built under the repo root.
		p = filepath.Join("..", "..", ".peer", "llama.cpp-cpu", "build", "bin", "llama-quantize")
	}
	if !fileExists(p) {
		return ""
	}
	return p
}

func fileExists(p string) bool { st, err := os.Stat(p); return err == nil && !st.IsDir() }

// TestQuantizeMatchesPeer runs llama-quantize itself, where a build of the
// peer is at hand, on what the staged files do not cover: Q4_0, Q8_0 and
// the plain types on kq-small, and every target on two synthetic shapes made
// to reach the layer-dependent rules (17 layers, GQA 4, untied output) and
// the fallbacks of rows that are not whole 256-blocks.
func TestQuantizeMatchesPeer(t *testing.T) {
	lq := llamaQuantize()
	if lq == "" {
		t.Skip("no llama-quantize built from the peer (.peer/llama.cpp-cpu/build/bin; or set GLINT_LLAMA_QUANTIZE)")
	}
	if testing.Short() || raceEnabled {
		t.Skip("slow: quantises 37 files (skipped with -short and -race)")
	}
	dir := t.TempDir()
	type job struct{ in, typ string }
	var jobs []job
	for _, typ := range []string{"Q4_0", "Q8_0", "F16", "BF16", "F32"} {
		jobs = append(jobs, job{shared.Models(t, "kquants/kq-small-F16.gguf"), typ})
	}
	for _, shape := range []string{"mix", "fallback"} {
		in := filepath.Join(dir, shape+"-F16.gguf")
		if err := synth.WriteGGUF(in, synth.Options{Shape: shape, Type: "F16", Seed: 3, Std: 0.05}); err != nil {
			t.Fatal(err)
		}
		for _, typ := range quant.FileTypeNames() {
			if d, _ := quant.LookupFileType(typ); d.Default.Quantized() {
				jobs = append(jobs, job{in, typ})
			}
		}
	}
	for _, j := range jobs {
		t.Run(strings.TrimSuffix(filepath.Base(j.in), ".gguf")+"/"+j.typ, func(t *testing.T) {
			want := filepath.Join(dir, "ref.gguf")
			if out, err := exec.Command(lq, j.in, want, j.typ, "2").CombinedOutput(); err != nil {
				t.Fatalf("llama-quantize: %v\n%s", err, out)
			}
			sameFile(t, quantize(t, j.in, j.typ), want)
		})
	}
}

// TestTypesRules checks the mix rules on a 17-layer model (the "mix" shape:
// GQA 4, untied output) against llama_tensor_get_type worked by hand.
// use_more_bits(i, 17) holds for i < 2, i ≥ 14 and (i-2) % 3 == 2: layers
// 0, 1, 4, 7, 10, 13, 14, 15, 16.
func TestTypesRules(t *testing.T) {
	var ts []quant.Tensor
	add := func(name string, dims ...int) { ts = append(ts, quant.Tensor{Name: name, Dims: dims, Type: dtype.F16}) }
	add("token_embd.weight", 256, 512)
	add("output.weight", 256, 512)
	add("output_norm.weight", 256)
	for i := range 17 {
		for _, n := range []string{"attn_q", "attn_output", "ffn_gate", "ffn_up"} {
			add(fmt.Sprintf("blk.%d.%s.weight", i, n), 256, 256)
		}
		add(fmt.Sprintf("blk.%d.attn_k.weight", i), 256, 64)
		add(fmt.Sprintf("blk.%d.attn_v.weight", i), 256, 64)
		add(fmt.Sprintf("blk.%d.ffn_down.weight", i), 256, 256)
		add(fmt.Sprintf("blk.%d.attn_norm.weight", i), 256)
	}
	quant.Order(ts)
	m := quant.Model{Arch: "llama", NLayer: 17, NHead: 4, NHeadKV: 1}
	more := map[int]bool{0: true, 1: true, 4: true, 7: true, 10: true, 13: true, 14: true, 15: true, 16: true}
	for _, tc := range []struct {
		ft   string
		want func(name string, layer int) dtype.Type
	}{
		{"Q4_K_M", func(name string, l int) dtype.Type {
			if (name == "attn_v" || name == "ffn_down") && more[l] {
				return dtype.Q6_K
			}
			return dtype.Q4_K
		}},
		{"Q3_K_M", func(name string, l int) dtype.Type {
			switch {
			case name == "attn_v" && l < 2, name == "ffn_down" && l < 1:
				return dtype.Q5_K
			case name == "attn_v", name == "ffn_down", name == "attn_output":
				return dtype.Q4_K
			}
			return dtype.Q3_K
		}},
		{"Q4_K_S", func(name string, l int) dtype.Type {
			if name == "attn_v" && l < 4 || name == "ffn_down" && l < 2 {
				return dtype.Q5_K
			}
			return dtype.Q4_K
		}},
		{"Q2_K", func(name string, l int) dtype.Type {
			switch name {
			case "attn_v": // GQA 4
				return dtype.Q4_K
			case "ffn_down", "attn_output":
				return dtype.Q3_K
			}
			return dtype.Q2_K
		}},
		{"IQ4_XS", func(name string, l int) dtype.Type {
			if name == "attn_v" || name == "ffn_down" && l < 2 {
				return dtype.Q5_K
			}
			return dtype.IQ4_XS
		}},
	} {
		ft, err := quant.LookupFileType(tc.ft)
		if err != nil {
			t.Fatal(err)
		}
		types, err := quant.Types(ft, m, ts)
		if err != nil {
			t.Fatal(err)
		}
		for _, tn := range ts {
			var want dtype.Type
			var l int
			var short string
			switch {
			case strings.HasSuffix(tn.Name, "norm.weight"):
				want = dtype.F16 // kept as stored
			case tn.Name == "output.weight":
				want = dtype.Q6_K
			case tn.Name == "token_embd.weight":
				want = ft.Default
			default:
				fmt.Sscanf(tn.Name, "blk.%d.", &l)
				short = strings.TrimSuffix(tn.Name[strings.Index(tn.Name[4:], ".")+5:], ".weight")
				want = tc.want(short, l)
			}
			if got := types[tn.Name]; got != want {
				t.Errorf("%s: %s is %v, want %v", tc.ft, tn.Name, got, want)
			}
		}
	}
}

// TestFallbacks: rows that are not whole 256-blocks take llama.cpp's
// fallback types, and rows that are not whole 32-blocks either are F16.
func TestFallbacks(t *testing.T) {
	m := quant.Model{Arch: "llama", NLayer: 1, NHead: 1, NHeadKV: 1}
	for _, tc := range []struct {
		ft   string
		cols int
		want dtype.Type
	}{
		{"Q4_K_S", 320, dtype.Q5_0}, {"Q5_K_S", 320, dtype.Q5_1}, {"Q6_K", 320, dtype.Q8_0},
		{"Q2_K", 320, dtype.IQ4_NL}, {"Q3_K_S", 320, dtype.IQ4_NL}, {"IQ4_XS", 320, dtype.IQ4_NL},
		{"Q4_K_S", 80, dtype.F16}, {"Q6_K", 48, dtype.F16},
	} {
		ft, _ := quant.LookupFileType(tc.ft)
		ts := []quant.Tensor{{Name: "blk.0.attn_q.weight", Dims: []int{tc.cols, 64}, Type: dtype.F32}}
		types, err := quant.Types(ft, m, ts)
		if err != nil {
			t.Fatal(err)
		}
		if got := types[ts[0].Name]; got != tc.want {
			t.Errorf("%s, rows of %d: %v, want %v", tc.ft, tc.cols, got, tc.want)
		}
	}
	ft, _ := quant.LookupFileType("Q4_0")
	_, err := quant.Types(ft, m, []quant.Tensor{{Name: "blk.0.attn_q.weight", Dims: []int{48, 64}, Type: dtype.F32}})
	if err == nil || !strings.Contains(err.Error(), `"blk.0.attn_q.weight": rows of 48 elements cannot be stored as Q4_0`) {
		t.Errorf("Q4_0 of 48-wide rows: err = %v", err)
	}
}

// TestHFFolderMatchesGGUF: a Hugging Face folder quantises to the same
// tensors as the GGUF file of the same weights (synth writes both from one
// seed): Q and K rows are permuted into GGUF order before quantising.
func TestHFFolderMatchesGGUF(t *testing.T) {
	dir := t.TempDir()
	o := synth.Options{Shape: "tiny", Type: "F16", Seed: 9}
	hf, gg := filepath.Join(dir, "hf"), filepath.Join(dir, "tiny.gguf")
	if err := synth.WriteHF(hf, o); err != nil {
		t.Fatal(err)
	}
	if err := synth.WriteGGUF(gg, o); err != nil {
		t.Fatal(err)
	}
	a, b := quantize(t, hf, "Q8_0"), quantize(t, gg, "Q8_0")
	fa, err := gguf.Open(a)
	if err != nil {
		t.Fatal(err)
	}
	defer fa.Close()
	fb, err := gguf.Open(b)
	if err != nil {
		t.Fatal(err)
	}
	defer fb.Close()
	n := 0
	for _, ti := range fb.Tensors {
		if len(ti.Dims) != 2 {
			continue // norms: F16 in the folder, F32 in the GGUF
		}
		da, ta, err := fa.TensorData(ti.Name)
		if err != nil {
			t.Fatal(err)
		}
		db, _, _ := fb.TensorData(ti.Name)
		if ta.Type != ti.Type || !bytes.Equal(da, db) {
			t.Errorf("%s: %v from the folder, %v from the GGUF; data equal: %v", ti.Name, ta.Type, ti.Type, bytes.Equal(da, db))
		}
		n++
	}
	if n == 0 {
		t.Fatal("no matrices compared")
	}
	if s, err := fa.String("general.architecture"); err != nil || s != "llama" {
		t.Errorf("general.architecture = %q, %v", s, err)
	}
}

// TestQuantizeErrors: bad input is refused with the reason and the place.
func TestQuantizeErrors(t *testing.T) {
	dir := t.TempDir()
	q8 := filepath.Join(dir, "q8.gguf")
	if err := synth.WriteGGUF(q8, synth.Options{Shape: "tiny", Type: "Q8_0"}); err != nil {
		t.Fatal(err)
	}
	q4, _ := quant.LookupFileType("Q4_0")
	if err := quant.Quantize(q8, filepath.Join(dir, "o.gguf"), q4, quant.Options{}); err == nil || !strings.Contains(err.Error(), "is already Q8_0") {
		t.Errorf("requantizing: err = %v", err)
	}
	if err := quant.Quantize(q8, filepath.Join(dir, "o.gguf"), q4, quant.Options{AllowRequantize: true}); err != nil {
		t.Errorf("requantizing, allowed: %v", err)
	}
	if err := quant.Quantize(filepath.Join(dir, "nope.gguf"), filepath.Join(dir, "o.gguf"), q4, quant.Options{}); err == nil || !strings.Contains(err.Error(), "nope.gguf") {
		t.Errorf("missing input: err = %v", err)
	}
	if _, err := quant.LookupFileType("IQ2_XXS"); err == nil || !strings.Contains(err.Error(), "Q4_K_M") {
		t.Errorf("unknown type: err = %v", err)
	}
	if ft, err := quant.LookupFileType("q4_k"); err != nil || ft.Name != "Q4_K_M" {
		t.Errorf("alias q4_k: %v, %v", ft, err)
	}
}
