package model

import (
	"fmt"
	"strings"
)

// Unfused returns src as the layers read it: where c says the file fuses
// matrices (FusedQKV, FusedGateUp), their parts appear under the separate
// names — blk.N.attn_q/attn_k/attn_v.weight (and .bias) cut from attn_qkv,
// blk.N.ffn_gate.weight and ffn_up.weight from Phi-3's ffn_up, gate first —
// as views of the fused tensor's rows (nothing is copied), and the fused
// names are gone. A source with nothing fused is returned as it is.
func Unfused(src Source, c Config) Source {
	if !c.FusedQKV && !c.FusedGateUp {
		return src
	}
	return &unfused{src: src, c: c}
}

type unfused struct {
	src Source
	c   Config
}

// part is where a separate tensor lies in a fused one: the fused tensor's
// layer-local name and the rows (for a bias, elements) [lo, hi).
type part struct {
	fused  string
	lo, hi int
}

// locate maps a separate layer tensor name to its part, or ok false when
// the name is not one cut from a fused tensor.
func (u *unfused) locate(name string) (prefix string, p part, ok bool) {
	rest, found := strings.CutPrefix(name, "blk.")
	if !found {
		return "", part{}, false
	}
	num, suffix, found := strings.Cut(rest, ".")
	if !found {
		return "", part{}, false
	}
	prefix = "blk." + num + "."
	c := u.c
	q, kv, ff := c.NHead*c.HeadDim, c.NHeadKV*c.HeadDim, c.NFF
	if c.FusedQKV {
		kind, ok := strings.CutSuffix(suffix, ".weight")
		ext := ".weight"
		if !ok {
			kind, ok = strings.CutSuffix(suffix, ".bias")
			ext = ".bias"
		}
		switch {
		case ok && kind == "attn_q":
			return prefix, part{"attn_qkv" + ext, 0, q}, true
		case ok && kind == "attn_k":
			return prefix, part{"attn_qkv" + ext, q, q + kv}, true
		case ok && kind == "attn_v":
			return prefix, part{"attn_qkv" + ext, q + kv, q + 2*kv}, true
		}
	}
	if c.FusedGateUp {
		switch suffix {
		case "ffn_gate.weight":
			return prefix, part{"ffn_up.weight", 0, ff}, true
		case "ffn_up.weight":
			return prefix, part{"ffn_up.weight", ff, 2 * ff}, true
		}
	}
	return "", part{}, false
}

// hidden reports whether name is a fused tensor, which the view hides.
func (u *unfused) hidden(name string) bool {
	if u.c.FusedQKV && (strings.HasSuffix(name, ".attn_qkv.weight") || strings.HasSuffix(name, ".attn_qkv.bias")) {
		return true
	}
	return false
}

func (u *unfused) Has(name string) bool {
	if prefix, p, ok := u.locate(name); ok {
		return u.src.Has(prefix + p.fused)
	}
	return !u.hidden(name) && u.src.Has(name)
}

func (u *unfused) Tensor(name string) (TensorData, error) {
	prefix, p, ok := u.locate(name)
	if !ok {
		if u.hidden(name) {
			return TensorData{}, fmt.Errorf("model: tensor %q is read as its parts", name)
		}
		return u.src.Tensor(name)
	}
	td, err := u.src.Tensor(prefix + p.fused)
	if err != nil {
		return TensorData{}, err
	}
	rows, cols := td.Shape[0], 1
	if len(td.Shape) == 2 {
		cols = td.Shape[1]
	}
	if len(td.Shape) > 2 || p.hi > rows {
		return TensorData{}, fmt.Errorf("model: tensor %q: shape %v does not hold rows [%d, %d) for %q", td.Name, td.Shape, p.lo, p.hi, name)
	}
	var rb int
	if len(td.Shape) == 2 {
		if rb, err = td.Type.RowBytes(cols); err != nil {
			return TensorData{}, fmt.Errorf("model: tensor %q: %w", td.Name, err)
		}
	} else {
		// A bias: elements, each a "row" of one value.
		rb = td.Type.BlockBytes()
		if td.Type.Quantized() {
			return TensorData{}, fmt.Errorf("model: tensor %q: a %v vector cannot be cut", td.Name, td.Type)
		}
	}
	if len(td.Data) < rows*rb {
		return TensorData{}, fmt.Errorf("model: tensor %q: %d bytes for %d rows of %d", td.Name, len(td.Data), rows, rb)
	}
	out := TensorData{Name: name, Type: td.Type, Data: td.Data[p.lo*rb : p.hi*rb : p.hi*rb]}
	if len(td.Shape) == 2 {
		out.Shape = []int{p.hi - p.lo, cols}
	} else {
		out.Shape = []int{p.hi - p.lo}
	}
	return out, nil
}

// ReleasePages releases the pages of the fused tensor a part lies in (the
// data stays readable, so releasing it before its last part is read costs
// only a re-read).
func (u *unfused) ReleasePages(name string) {
	pr, ok := u.src.(PageReleaser)
	if !ok {
		return
	}
	if prefix, p, ok := u.locate(name); ok {
		name = prefix + p.fused
	}
	pr.ReleasePages(name)
}
