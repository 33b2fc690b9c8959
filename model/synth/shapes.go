package synth

import (
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
}

// llama3Scaling is Llama 3.2's rope_scaling.
var llama3Scaling = model.RopeScaling{Factor: 32, LowFreqFactor: 1, HighFreqFactor: 4, OriginalContext: 8192}

// Shapes are the built-in geometries. "llama3.2-1b" is Llama 3.2 1B's;
// "small" is the staged llama3-small's (its 256-wide rows make the tied
// embedding Q6_K in the Q4_0 mix); "tiny" is the smallest useful Llama.
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
		Vocab: 512, Context: 2048, RopeTheta: 500000, Llama3Rope: true, Tied: true},
}

// LookupShape returns the named shape.
func LookupShape(name string) (Shape, error) {
	s, ok := Shapes[name]
	if !ok {
		return Shape{}, fmt.Errorf("synth: unknown shape %q (have %s)", name, strings.Join(ShapeNames(), ", "))
	}
	return s, nil
}

// Config is the model.Config of a GGUF file of this shape (adjacent-pair
// RoPE; a Hugging Face folder sets RopeNeoX).
func (s Shape) Config() model.Config {
	return model.Config{
		Arch: "llama", NLayer: s.NLayer, NEmbd: s.NEmbd, NHead: s.NHead, NHeadKV: s.NHeadKV,
		HeadDim: s.HeadDim, NFF: s.NFF, Vocab: s.Vocab, Context: s.Context,
		RMSEps: 1e-5, RopeTheta: s.RopeTheta, RopeDims: s.HeadDim,
		HasRopeFreqs: s.Llama3Rope, TiedEmbeddings: s.Tied,
	}
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
