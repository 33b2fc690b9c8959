package engine_test

import (
	"context"
	"slices"
	"testing"

	"github.com/glint-llm/glint/engine"
)

// TestNgramSimple checks the lookup against cases worked by hand: the
// longest pattern wins, the newest occurrence first, a shorter one is the
// fallback, and M and max cap the draft.
func TestNgramSimple(t *testing.T) {
	ctx := []int32{1, 2, 3, 9, 2, 3, 5, 7, 1, 2, 3}
	for _, c := range []struct {
		d    engine.NgramSimple
		max  int
		toks []int32
		want []int32
	}{
		{engine.NgramSimple{N: 3, M: 8, Min: 1}, 8, ctx, []int32{9, 2, 3, 5, 7, 1, 2, 3}},
		{engine.NgramSimple{N: 3, M: 2, Min: 1}, 8, ctx, []int32{9, 2}},
		{engine.NgramSimple{N: 3, M: 8, Min: 1}, 3, ctx, []int32{9, 2, 3}},
		{engine.NgramSimple{N: 2, M: 8, Min: 1}, 8, ctx, []int32{5, 7, 1, 2, 3}},          // [2 3] newest at 4
		{engine.NgramSimple{N: 4, M: 8, Min: 4}, 8, ctx, nil},                             // [3 1 2 3]... [7 1 2 3] recurs nowhere
		{engine.NgramSimple{N: 4, M: 8, Min: 1}, 8, ctx, []int32{9, 2, 3, 5, 7, 1, 2, 3}}, // falls back to [1 2 3]
		{engine.NgramSimple{N: 2, M: 8, Min: 1}, 8, []int32{4, 5, 6}, nil},
		{engine.NgramSimple{N: 2, M: 8, Min: 1}, 8, []int32{6, 5, 6}, []int32{5, 6}},
		{engine.NgramSimple{N: 2, M: 8, Min: 1}, 8, []int32{6}, nil},
	} {
		got, err := c.d.Draft(context.Background(), c.toks, c.max)
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("%+v max %d over %v: %v, %v; want %v", c.d, c.max, c.toks, got, err, c.want)
		}
	}
	if _, err := (engine.NgramSimple{N: 2, M: 8, Min: 3}).Draft(context.Background(), ctx, 8); err == nil {
		t.Error("Min > N: no error")
	}
}
