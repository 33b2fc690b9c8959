package engine_test

import (
	"errors"
	"math"
	"testing"

	"github.com/glint-llm/glint/engine"
	"github.com/glint-llm/glint/layers"
)

// Normalize gives the float64 unit vector to float32 rounding, and leaves
// a zero vector alone.
func TestEmbedNormalize(t *testing.T) {
	v := []float32{3, -4, 0.5, 1e-3, 12}
	var n float64
	for _, x := range v {
		n += float64(x) * float64(x)
	}
	n = math.Sqrt(n)
	got := append([]float32(nil), v...)
	engine.Normalize(got)
	for i, x := range v {
		if d := math.Abs(float64(got[i]) - float64(x)/n); d > 1e-7 {
			t.Errorf("element %d: %g, want %g", i, got[i], float64(x)/n)
		}
	}
	z := make([]float32, 4)
	engine.Normalize(z)
	for _, x := range z {
		if x != 0 {
			t.Fatalf("zero vector normalised to %v", z)
		}
	}
}

func TestEmbedParsePooling(t *testing.T) {
	for _, s := range []string{"none", "mean", "cls", "last"} {
		p, err := engine.ParsePooling(s)
		if err != nil || p.String() != s {
			t.Errorf("ParsePooling(%q) = %v, %v", s, p, err)
		}
	}
	for _, s := range []string{"", "rank", "MEAN", "max"} {
		if _, err := engine.ParsePooling(s); err == nil {
			t.Errorf("ParsePooling(%q): no error", s)
		}
	}
}

// Embed refuses what it cannot do with an error, and a model that gives no
// hidden states (the ONNX runner) with ErrUnsupported. A prompt that fills
// the context exactly is embedded; one token more is ErrContextFull.
func TestEmbedErrors(t *testing.T) {
	e := newEngine(t, synthModel(t, "F32", 3, layers.Options{Context: 64}))
	s := newSession(t, e, engine.SessionOptions{})
	ctx := t.Context()
	long := make([]int32, 65)
	for i := range long {
		long[i] = int32(i % 100)
	}
	if _, err := s.Embed(ctx, long, engine.PoolingMean); !errors.Is(err, engine.ErrContextFull) {
		t.Errorf("65 tokens in a context of 64: %v, want ErrContextFull", err)
	}
	if v, err := s.Embed(ctx, long[:64], engine.PoolingLast); err != nil || len(v) != 1 {
		t.Errorf("64 tokens in a context of 64: %d vectors, %v", len(v), err)
	}
	if s.Fed() != 64 {
		t.Errorf("the session holds %d tokens after the embedding, want 64", s.Fed())
	}
	for name, tc := range map[string]struct {
		ids []int32
		p   engine.Pooling
	}{
		"empty":        {nil, engine.PoolingMean},
		"bad token":    {[]int32{1, -2}, engine.PoolingMean},
		"huge token":   {[]int32{1, 1 << 30}, engine.PoolingMean},
		"rank pooling": {[]int32{1}, engine.PoolingRank},
		"unspecified":  {[]int32{1}, engine.PoolingUnspecified},
	} {
		if _, err := s.Embed(ctx, tc.ids, tc.p); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	c := newSession(t, newEngine(t, newCounter(64, 100, 1)), engine.SessionOptions{})
	if _, err := c.Embed(ctx, []int32{1, 2}, engine.PoolingMean); !errors.Is(err, engine.ErrUnsupported) {
		t.Errorf("a model without hidden states: %v, want ErrUnsupported", err)
	}
}
