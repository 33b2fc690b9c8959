package backendtest

import (
	"errors"
	"testing"

	"github.com/glint-llm/glint/backend"
	"github.com/glint-llm/glint/dtype"
)

// testErrors gives each bad call a fresh backend and checks that it is
// recorded as an error wrapping backend.ErrShape, without a panic, and that
// the error stays (is sticky) through a later valid op. Sync reports it:
// a device backend finds a bad row of an attention view only on the device.
func testErrors(t *testing.T, newBackend func(t *testing.T) backend.Backend) {
	// A small kit of well-formed tensors for the bad calls to misuse.
	type kit struct {
		x     backend.Tensor // F32 [3, 64]
		y     backend.Tensor // F32 [3, 64]
		wide  backend.Tensor // F32 [3, 96]
		w     backend.Tensor // Q8_0 [5, 64]
		norm  backend.Tensor // F32 [64]
		ids   backend.Tensor // I32 [3]
		cache backend.Tensor // F32 [8, 2, 16]
		q     backend.Tensor // F32 [3, 64] = 4 heads of 16
		pos   backend.Tensor // I32 [3]
		view  backend.KVView // 3 causal rows over 8 cells of sequence 0
	}
	attn := backend.Attn{Heads: 4, KVHeads: 2, HeadDim: 16, Scale: 0.25}
	// badRow makes the view's row 1 hold r.
	badRow := func(be backend.Backend, k *kit, r ...int32) backend.KVView {
		if err := be.WriteI32(k.view.Rows, 4, r); err != nil {
			t.Fatal(err)
		}
		return k.view
	}
	cases := []struct {
		name string
		call func(be backend.Backend, k *kit)
	}{
		{"MatMul inner size", func(be backend.Backend, k *kit) { be.MatMulTransposed(k.x, k.wide, k.w, 1) }},
		{"MatMul dst cols", func(be backend.Backend, k *kit) { be.MatMulTransposed(k.x, k.x, k.w, 1) }},
		{"MatMul n past rows", func(be backend.Backend, k *kit) {
			d, _ := be.Alloc(dtype.F32, 3, 5)
			be.MatMulTransposed(d, k.x, k.w, 4)
		}},
		{"MatMul x not F32", func(be backend.Backend, k *kit) {
			d, _ := be.Alloc(dtype.F32, 3, 5)
			xi, _ := be.Alloc(dtype.I32, 3, 64)
			be.MatMulTransposed(d, xi, k.w, 1)
		}},
		{"MatMulDecode inner size", func(be backend.Backend, k *kit) { be.MatMulDecode(k.x, k.wide, k.w, 2) }},
		{"MatMulDecode n past rows", func(be backend.Backend, k *kit) {
			d, _ := be.Alloc(dtype.F32, 3, 5)
			be.MatMulDecode(d, k.x, k.w, 4)
		}},
		{"Embedding dim", func(be backend.Backend, k *kit) { be.Embedding(k.wide, k.w, k.ids, 2) }},
		{"Embedding ids not I32", func(be backend.Backend, k *kit) { be.Embedding(k.x, k.w, k.y, 2) }},
		{"RMSNorm weight size", func(be backend.Backend, k *kit) { be.RMSNorm(k.wide, k.wide, k.norm, 1, 1e-5) }},
		{"RMSNorm negative n", func(be backend.Backend, k *kit) { be.RMSNorm(k.x, k.x, k.norm, -1, 1e-5) }},
		{"RMSNorm weight not a divisor", func(be backend.Backend, k *kit) {
			w, _ := be.Alloc(dtype.F32, 24)
			be.RMSNorm(k.x, k.x, w, 1, 1e-5)
		}},
		{"LayerNorm weight size", func(be backend.Backend, k *kit) { be.LayerNorm(k.wide, k.wide, k.norm, nil, 1, 1e-5) }},
		{"LayerNorm bias size", func(be backend.Backend, k *kit) {
			b, _ := be.Alloc(dtype.F32, 32)
			be.LayerNorm(k.x, k.x, k.norm, b, 1, 1e-5)
		}},
		{"GELUMul cols", func(be backend.Backend, k *kit) { be.GELUMul(k.x, k.wide, k.y, 1) }},
		{"GELU n past rows", func(be backend.Backend, k *kit) { be.GELU(k.x, k.y, 4) }},
		{"AddBias size", func(be backend.Backend, k *kit) { be.AddBias(k.wide, k.wide, k.norm, 1) }},
		{"AddBias not F32", func(be backend.Backend, k *kit) { be.AddBias(k.x, k.x, k.ids, 1) }},
		{"Scale cols", func(be backend.Backend, k *kit) { be.Scale(k.x, k.wide, 1, 2) }},
		{"SoftCap zero cap", func(be backend.Backend, k *kit) { be.SoftCap(k.x, 1, 0) }},
		{"RoPE odd dims", func(be backend.Backend, k *kit) { be.RoPE(k.q, 1, 4, 16, k.pos, backend.Rope{Dims: 7, Theta: 1e4}) }},
		{"RoPE dims past head", func(be backend.Backend, k *kit) {
			be.RoPE(k.q, 1, 4, 16, k.pos, backend.Rope{Dims: 18, Theta: 1e4})
		}},
		{"RoPE heads", func(be backend.Backend, k *kit) { be.RoPE(k.q, 1, 3, 16, k.pos, backend.Rope{Dims: 16, Theta: 1e4}) }},
		{"RoPE negative scale", func(be backend.Backend, k *kit) {
			be.RoPE(k.q, 1, 4, 16, k.pos, backend.Rope{Dims: 16, Theta: 1e4, FreqScale: -1})
		}},
		{"RoPE freqs size", func(be backend.Backend, k *kit) {
			be.RoPE(k.q, 1, 4, 16, k.pos, backend.Rope{Dims: 16, Theta: 1e4, Freqs: k.norm})
		}},
		{"RoPE fewer positions than rows", func(be backend.Backend, k *kit) {
			p, _ := be.Alloc(dtype.I32, 2)
			be.RoPE(k.q, 3, 4, 16, p, backend.Rope{Dims: 16, Theta: 1e4})
		}},
		{"RoPE positions not I32", func(be backend.Backend, k *kit) { be.RoPE(k.q, 1, 4, 16, k.x, backend.Rope{Dims: 16, Theta: 1e4}) }},
		{"SiLUMul cols", func(be backend.Backend, k *kit) { be.SiLUMul(k.x, k.wide, k.y, 1) }},
		{"Add cols", func(be backend.Backend, k *kit) { be.Add(k.x, k.x, k.wide, 1) }},
		{"Add n past rows", func(be backend.Backend, k *kit) { be.Add(k.x, k.x, k.y, 4) }},
		{"CopySlice past end", func(be backend.Backend, k *kit) { be.CopySlice(k.cache, 250, k.x, 0, 10) }},
		{"CopySlice source past end", func(be backend.Backend, k *kit) { be.CopySlice(k.cache, 0, k.x, 190, 10) }},
		{"CopySlice type", func(be backend.Backend, k *kit) { be.CopySlice(k.cache, 0, k.ids, 0, 1) }},
		{"CopySlice into a block type mid-block", func(be backend.Backend, k *kit) {
			c, _ := be.Alloc(dtype.Q8_0, 8, 1, 32)
			be.CopySlice(c, 16, k.x, 0, 32)
		}},
		{"CopySlice between block types", func(be backend.Backend, k *kit) {
			a, _ := be.Alloc(dtype.Q8_0, 8, 1, 32)
			b, _ := be.Alloc(dtype.Q4_0, 8, 1, 32)
			be.CopySlice(a, 0, b, 0, 32)
		}},
		{"Attention quantised V without flash", func(be backend.Backend, k *kit) {
			kc, _ := be.Alloc(dtype.F16, 8, 1, 32)
			vc, _ := be.Alloc(dtype.Q8_0, 8, 1, 32)
			be.Attention(k.y, k.q, kc, vc, 1, k.view, backend.Attn{Heads: 2, KVHeads: 1, HeadDim: 32, Scale: 0.25})
		}},
		{"Attention quantised K without flash", func(be backend.Backend, k *kit) {
			kc, _ := be.Alloc(dtype.Q4_0, 8, 1, 32)
			vc, _ := be.Alloc(dtype.F16, 8, 1, 32)
			be.Attention(k.y, k.q, kc, vc, 1, k.view, backend.Attn{Heads: 2, KVHeads: 1, HeadDim: 32, Scale: 0.25})
		}},
		{"Attention heads not multiple of kv heads", func(be backend.Backend, k *kit) {
			be.Attention(k.y, k.q, k.cache, k.cache, 1, k.view, backend.Attn{Heads: 3, KVHeads: 2, HeadDim: 16, Scale: 0.25})
		}},
		{"Attention head size", func(be backend.Backend, k *kit) {
			be.Attention(k.y, k.q, k.cache, k.cache, 1, k.view, backend.Attn{Heads: 4, KVHeads: 2, HeadDim: 8, Scale: 0.25})
		}},
		{"Attention negative window", func(be backend.Backend, k *kit) {
			be.Attention(k.y, k.q, k.cache, k.cache, 1, k.view, backend.Attn{Heads: 4, KVHeads: 2, HeadDim: 16, Window: -1})
		}},
		{"Attention negative soft cap", func(be backend.Backend, k *kit) {
			be.Attention(k.y, k.q, k.cache, k.cache, 1, k.view, backend.Attn{Heads: 4, KVHeads: 2, HeadDim: 16, SoftCap: -30})
		}},
		{"Attention view past cache", func(be backend.Backend, k *kit) {
			v := k.view
			v.Hi = 9
			be.Attention(k.y, k.q, k.cache, k.cache, 1, v, attn)
		}},
		{"Attention view reversed", func(be backend.Backend, k *kit) {
			v := k.view
			v.Lo, v.Hi = 3, 2
			be.Attention(k.y, k.q, k.cache, k.cache, 1, v, attn)
		}},
		{"Attention rows not [n, 4]", func(be backend.Backend, k *kit) {
			v := k.view
			v.Rows = k.ids
			be.Attention(k.y, k.q, k.cache, k.cache, 1, v, attn)
		}},
		{"Attention cells not I32", func(be backend.Backend, k *kit) {
			v := k.view
			v.Cells = k.x
			be.Attention(k.y, k.q, k.cache, k.cache, 1, v, attn)
		}},
		{"Attention row range past the view", func(be backend.Backend, k *kit) {
			be.Attention(k.y, k.q, k.cache, k.cache, 3, badRow(be, k, 1, 0, 0, 4), attn)
		}},
		{"Attention row range reversed", func(be backend.Backend, k *kit) {
			be.Attention(k.y, k.q, k.cache, k.cache, 3, badRow(be, k, 1, 0, 2, 1), attn)
		}},
		{"Attention row sequence 64", func(be backend.Backend, k *kit) {
			be.Attention(k.y, k.q, k.cache, k.cache, 3, badRow(be, k, 1, 64, 0, 2), attn)
		}},
		{"Attention row negative sequence", func(be backend.Backend, k *kit) {
			be.Attention(k.y, k.q, k.cache, k.cache, 3, badRow(be, k, 1, -1, 0, 2), attn)
		}},
		{"Argmax dst not I32", func(be backend.Backend, k *kit) { be.Argmax(k.y, k.x, 1) }},
		{"Argmax dst too small", func(be backend.Backend, k *kit) {
			d, _ := be.Alloc(dtype.I32, 2)
			be.Argmax(d, k.x, 3)
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, newBackend)
			k := &kit{
				x:     h.f32(h.rand(3*64), 3, 64),
				y:     h.f32(h.rand(3*64), 3, 64),
				wide:  h.f32(h.rand(3*96), 3, 96),
				w:     h.weight("w", dtype.Q8_0, RandomWeight(t, h.rng, dtype.Q8_0, 5, 64), 5, 64),
				norm:  h.weight("norm", dtype.F32, f32Bytes(h.rand(64)), 64),
				ids:   h.i32([]int32{0, 1, 2}, 3),
				cache: h.f32(h.rand(8*2*16), 8, 2, 16),
				q:     h.f32(h.rand(3*64), 3, 64),
				pos:   h.i32([]int32{0, 1, 2}, 3),
			}
			var err error
			if k.view, err = Causal(3, 0).Upload(h.be); err != nil {
				t.Fatal(err)
			}
			h.sync()
			tc.call(h.be, k)
			err = h.be.Sync()
			if !errors.Is(err, backend.ErrShape) {
				t.Fatalf("Err() = %v, want an error wrapping backend.ErrShape", err)
			}
			// Sticky: a valid op afterwards neither clears nor replaces it.
			h.be.Add(k.y, k.x, k.x, 1)
			if err2 := h.be.Sync(); err2 == nil || err2.Error() != err.Error() {
				t.Errorf("after a valid op, Sync() = %v, want the first error %v", err2, err)
			}
		})
	}

	t.Run("Weight size", func(t *testing.T) {
		h := newHarness(t, newBackend)
		if _, err := h.be.Weight("w", dtype.Q4_0, []int{4, 64}, make([]byte, 4*2*dtype.BlockBytesQ4_0-1)); err == nil {
			t.Error("Weight with a byte short: no error")
		}
		if _, err := h.be.Weight("w", dtype.Q4_0, []int{4, 48}, make([]byte, 4*48)); err == nil {
			t.Error("Weight with a partial block: no error")
		}
		if _, err := h.be.Alloc(dtype.F32, 3, -1); err == nil {
			t.Error("Alloc with a negative dimension: no error")
		}
	})
}
