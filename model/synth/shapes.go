package synth

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/glint-llm/glint/model"
)

// Shape is a named model geometry.
type Shape struct {
	Name      string
	NLayer    int
	NEmbd     int
	NHead     int
	NHeadKV   int
	HeadDim   int
	NFF       int
	Vocab     int // without VocabGGUF; a vocabulary file sets its own
	Context   int
	RopeTheta float32
	// Llama3Rope adds Llama 3.1/3.2 frequency scaling (factor 32, low 1,
	// high 4, original context 8192) as rope_freqs.weight.
	Llama3Rope bool
	Tied       bool
	// Window is the sliding window of the architectures that have one
	// (Gemma, Phi-3); 0 takes Window's default: 4096, Phi-3's 2047.
	Window int
	// RopeFactor, when set, is a linear RoPE scaling factor for Gemma 3's
	// global layers (its 4B and larger models have 8).
	RopeFactor float32
	// Arch, when set, is the architecture the shape was made for; Config
	// of another is an error (Gemma 2's, whose layer count llama.cpp reads
	// as its model size, must have 26 layers to be read at all).
	Arch string
}

// llama3Scaling is Llama 3.2's rope_scaling.
var llama3Scaling = model.RopeScaling{Factor: 32, LowFreqFactor: 1, HighFreqFactor: 4, OriginalContext: 8192}

// Shapes are the built-in geometries. "llama3.2-1b" is Llama 3.2 1B's;
// "small" is the staged llama3-small's (its 256-wide rows make the tied
// embedding Q6_K in the Q4_0 mix); "tiny" is the smallest useful model, of
// any architecture but Gemma 2, whose smallest is "gemma2-tiny"; its
// sliding window of 8 makes short tests cross it. "gemma3-tiny" has the six
// layers that give Gemma 3 a global layer, with 4B's linear RoPE scaling. "qwen2.5-0.5b",
// "qwen3-0.6b" and "gemma3-270m" are those models' geometries.
var Shapes = map[string]Shape{
	"llama3.2-1b": {Name: "llama3.2-1b", NLayer: 16, NEmbd: 2048, NHead: 32, NHeadKV: 8, HeadDim: 64, NFF: 8192,
		Vocab: 128256, Context: 131072, RopeTheta: 500000, Llama3Rope: true, Tied: true},
	"small": {Name: "small", NLayer: 2, NEmbd: 256, NHead: 4, NHeadKV: 2, HeadDim: 64, NFF: 512,
		Vocab: 2048, Context: 2048, RopeTheta: 500000, Llama3Rope: true, Tied: true},
	// "mix" and "fallback" exist to exercise llama-quantize's rules: 17
	// layers reach every layer-dependent case (n/16, n/8, use_more_bits),
	// one KV head for four (GQA 4) and an untied output; 320-wide and
	// 480-wide rows are not whole 256-blocks, so K-quant targets fall back.
	"mix": {Name: "mix", NLayer: 17, NEmbd: 256, NHead: 4, NHeadKV: 1, HeadDim: 64, NFF: 256,
		Vocab: 512, Context: 512, RopeTheta: 10000},
	"fallback": {Name: "fallback", NLayer: 2, NEmbd: 320, NHead: 5, NHeadKV: 5, HeadDim: 64, NFF: 480,
		Vocab: 512, Context: 512, RopeTheta: 10000, Tied: true},
	"tiny": {Name: "tiny", NLayer: 2, NEmbd: 64, NHead: 4, NHeadKV: 2, HeadDim: 16, NFF: 128,
		Vocab: 512, Context: 2048, RopeTheta: 500000, Llama3Rope: true, Tied: true, Window: 8},
	"gemma3-tiny": {Name: "gemma3-tiny", NLayer: 6, NEmbd: 64, NHead: 4, NHeadKV: 2, HeadDim: 16, NFF: 128,
		Vocab: 512, Context: 2048, RopeTheta: 1000000, Tied: true, Window: 8, RopeFactor: 8, Arch: "gemma3"},
	"gemma2-tiny": {Name: "gemma2-tiny", NLayer: 26, NEmbd: 64, NHead: 4, NHeadKV: 2, HeadDim: 16, NFF: 128,
		Vocab: 512, Context: 2048, RopeTheta: 10000, Tied: true, Window: 8, Arch: "gemma2"},
	"qwen2.5-0.5b": {Name: "qwen2.5-0.5b", NLayer: 24, NEmbd: 896, NHead: 14, NHeadKV: 2, HeadDim: 64, NFF: 4864,
		Vocab: 151936, Context: 32768, RopeTheta: 1000000, Tied: true, Arch: "qwen2"},
	"qwen3-0.6b": {Name: "qwen3-0.6b", NLayer: 28, NEmbd: 1024, NHead: 16, NHeadKV: 8, HeadDim: 128, NFF: 3072,
		Vocab: 151936, Context: 40960, RopeTheta: 1000000, Tied: true, Arch: "qwen3"},
	"gemma3-270m": {Name: "gemma3-270m", NLayer: 18, NEmbd: 640, NHead: 4, NHeadKV: 1, HeadDim: 256, NFF: 2048,
		Vocab: 262144, Context: 32768, RopeTheta: 1000000, Tied: true, Window: 512, Arch: "gemma3"},
}

// LookupShape returns the named shape.
func LookupShape(name string) (Shape, error) {
	s, ok := Shapes[name]
	if !ok {
		return Shape{}, fmt.Errorf("synth: unknown shape %q (have %s)", name, strings.Join(ShapeNames(), ", "))
	}
	return s, nil
}

// Config is the model.Config of a GGUF file of this shape and architecture
// (llama: adjacent-pair RoPE; a Hugging Face folder sets RopeNeoX). Llama 3
// rope scaling applies to llama only; Phi-3 gets LongRoPE factors instead,
// and GPT-2 the separate output matrix its converter writes.
func (s Shape) Config(arch string) (model.Config, error) {
	if arch == "" {
		arch = "llama"
	}
	if s.Arch != "" && s.Arch != arch {
		return model.Config{}, fmt.Errorf("synth: shape %q is for %s, not %s", s.Name, s.Arch, arch)
	}
	c := model.Config{
		Arch: arch, NLayer: s.NLayer, NEmbd: s.NEmbd, NHead: s.NHead, NHeadKV: s.NHeadKV,
		HeadDim: s.HeadDim, NFF: s.NFF, Vocab: s.Vocab, Context: s.Context,
		RMSEps: 1e-5, RopeTheta: s.RopeTheta, RopeDims: s.HeadDim,
		HasRopeFreqs: s.Llama3Rope && arch == "llama", TiedEmbeddings: s.Tied,
	}
	switch arch {
	case "gemma2", "gemma3":
		c.RMSEps = 1e-6
		c.SlidingWindow = cmp.Or(s.Window, 4096)
		if arch == "gemma2" {
			c.AttnSoftCap, c.FinalSoftCap = 50, 30
		} else if s.RopeFactor > 0 {
			c.RopeFreqScale = 1 / s.RopeFactor
		}
	case "qwen2", "qwen3":
		c.RMSEps = 1e-6
	case "phi3":
		c.SlidingWindow = cmp.Or(s.Window, 2047)
		// LongRoPE trained at half the context, so that its attention
		// factor applies (as Phi-3.5's, 131072 from 4096, does).
		c.HasRopeFactors, c.RopeOrigContext = true, c.Context/2
		c.RopeAttnFactor = model.LongRoPEAttnFactor(c.Context, c.RopeOrigContext)
		c.TiedEmbeddings = false // llama.cpp's Phi-3 requires output.weight
	case "gpt2":
		c.TiedEmbeddings = false // the converter writes output.weight, a copy of token_embd
		c.NHeadKV = c.NHead      // GPT-2 has no grouped-query attention
	}
	c, err := c.WithArch()
	if err != nil {
		return c, fmt.Errorf("synth: %w", err)
	}
	return c, nil
}

// ShapeNames lists the built-in shapes, sorted.
func ShapeNames() []string {
	names := make([]string, 0, len(Shapes))
	for n := range Shapes {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}
