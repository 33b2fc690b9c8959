// Package quant is glint's llama-quantize: the file types (Q4_K_M and the
// rest), llama.cpp's rules for which type each tensor of a model gets
// (llama_tensor_get_type in llama.cpp's src/llama-quant.cpp, with no
// importance matrix), and the conversion of a whole GGUF file or Hugging
// Face folder. The quantisers themselves are dtype.QuantizeRow, ggml's
// reference code, so the output has llama-quantize's bytes.
package quant

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/glint-llm/glint/dtype"
)

// FileType is one of llama-quantize's targets.
type FileType struct {
	Name    string     // as llama-quantize spells it: "Q4_K_M"
	ID      uint32     // llama.cpp's enum llama_ftype, stored as general.file_type
	Default dtype.Type // the type of the tensors no rule singles out
}

// fileTypes are the targets glint implements, in llama-quantize's order.
var fileTypes = []FileType{
	{"Q4_0", 2, dtype.Q4_0},
	{"Q4_1", 3, dtype.Q4_1},
	{"Q5_0", 8, dtype.Q5_0},
	{"Q5_1", 9, dtype.Q5_1},
	{"IQ4_NL", 25, dtype.IQ4_NL},
	{"IQ4_XS", 30, dtype.IQ4_XS},
	{"Q2_K", 10, dtype.Q2_K},
	{"Q3_K_S", 11, dtype.Q3_K},
	{"Q3_K_M", 12, dtype.Q3_K},
	{"Q3_K_L", 13, dtype.Q3_K},
	{"Q4_K_S", 14, dtype.Q4_K},
	{"Q4_K_M", 15, dtype.Q4_K},
	{"Q5_K_S", 16, dtype.Q5_K},
	{"Q5_K_M", 17, dtype.Q5_K},
	{"Q6_K", 18, dtype.Q6_K},
	{"Q8_0", 7, dtype.Q8_0},
	{"F16", 1, dtype.F16},
	{"BF16", 32, dtype.BF16},
	{"F32", 0, dtype.F32},
}

// aliases are llama-quantize's other names for the same targets.
var aliases = map[string]string{"Q3_K": "Q3_K_M", "Q4_K": "Q4_K_M", "Q5_K": "Q5_K_M"}

// LookupFileType returns the target named name (case-insensitive, as
// llama-quantize accepts it).
func LookupFileType(name string) (FileType, error) {
	n := strings.ToUpper(name)
	if a, ok := aliases[n]; ok {
		n = a
	}
	for _, ft := range fileTypes {
		if ft.Name == n {
			return ft, nil
		}
	}
	return FileType{}, fmt.Errorf("quant: unknown type %q (want one of %s)", name, strings.Join(FileTypeNames(), ", "))
}

// FileTypeNames lists the targets.
func FileTypeNames() []string {
	s := make([]string, len(fileTypes))
	for i, ft := range fileTypes {
		s[i] = ft.Name
	}
	return s
}

// Model is what the rules need to know about the model beyond its tensors.
type Model struct {
	Arch     string // general.architecture ("llama"; "falcon" changes some rules)
	NLayer   int
	NHead    int
	NHeadKV  int
	NExpert  int // 0 or 1 for a dense model
	HasImatx bool
}

// Tensor is one tensor of the input: its name, ggml dims (ne0, the row
// length, first) and stored type.
type Tensor struct {
	Name string
	Dims []int
	Type dtype.Type
}

// layerOf is the number in a "blk.N." prefix, or -1.
func layerOf(name string) int {
	rest, ok := strings.CutPrefix(name, "blk.")
	if !ok {
		return -1
	}
	i := strings.IndexByte(rest, '.')
	if i < 0 {
		return -1
	}
	n, err := strconv.Atoi(rest[:i])
	if err != nil {
		return -1
	}
	return n
}

// Order sorts tensors as llama-quantize visits and writes them (its
// weights_map order): by layer number, tensors outside layers first, then by
// name. The visiting order matters: some rules count attn_v tensors.
func Order(ts []Tensor) {
	slices.SortStableFunc(ts, func(a, b Tensor) int {
		if c := cmp.Compare(layerOf(a.Name), layerOf(b.Name)); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
}

// nDims is ggml_n_dims: trailing dimensions of 1 do not count.
func nDims(dims []int) int {
	n := len(dims)
	for n > 1 && dims[n-1] == 1 {
		n--
	}
	return max(n, 1)
}

// quantizable is llama-quantize's filter: matrices named *weight, except
// norms, expert gates and the small tensors of other architectures.
func quantizable(t Tensor) bool {
	name := t.Name
	if !strings.HasSuffix(name, "weight") || nDims(t.Dims) < 2 {
		return false
	}
	if name == "position_embd.weight" || name == "token_types.weight" {
		return false
	}
	for _, s := range []string{"_norm.weight", "ffn_gate_inp.weight", "ssm_conv1d.weight", "time_mix_first.weight",
		"time_mix_w1.weight", "time_mix_w2.weight", "time_mix_decay_w1.weight", "time_mix_decay_w2.weight",
		"time_mix_lerp_fused.weight", "attn_rel_b.weight"} {
		if strings.Contains(name, s) {
			return false
		}
	}
	return true
}

// Types returns the type llama-quantize gives each tensor for target ft
// (its name → type; a tensor kept as it is maps to its own type). ts must be
// in Order. A row length no type fits is an error, as in llama-quantize.
func Types(ft FileType, m Model, ts []Tensor) (map[string]dtype.Type, error) {
	s := &mixer{ft: ft.Name, m: m}
	for _, t := range ts {
		if strings.Contains(t.Name, "attn_v.weight") || strings.Contains(t.Name, "attn_qkv.weight") || strings.Contains(t.Name, "attn_kv_b.weight") {
			s.nAttnV++
		} else if t.Name == "output.weight" {
			s.hasOutput = true
		}
	}
	s.nFFN = m.NLayer
	out := make(map[string]dtype.Type, len(ts))
	for _, t := range ts {
		nt := t.Type
		if quantizable(t) {
			nt = ft.Default
			if ft.Default.Quantized() {
				var err error
				if nt, err = s.tensorType(t, nt); err != nil {
					return nil, err
				}
			}
		}
		out[t.Name] = nt
	}
	return out, nil
}

// mixer is llama.cpp's quantize_state_impl: the counters the rules use.
type mixer struct {
	ft                       string
	m                        Model
	nAttnV, iAttnV           int
	nFFN, iFFNDown, iFFNGate int
	iFFNUp                   int
	hasOutput                bool
}

func useMoreBits(i, n int) bool { return i < n/8 || i >= 7*n/8 || (i-n/8)%3 == 2 }

// layerInfo is the layer of a ffn tensor: the running count for a dense
// model, the blk number for an MoE one (whose experts are not in order).
func (s *mixer) layerInfo(i int, name string) (int, int, error) {
	if max(1, s.m.NExpert) > 1 {
		l := layerOf(name)
		if l < 0 || l >= s.nFFN {
			return 0, 0, fmt.Errorf("quant: tensor %q: cannot tell its layer (of %d)", name, s.nFFN)
		}
		return l, s.nFFN, nil
	}
	return i, s.nFFN, nil
}

// tensorType is llama_tensor_get_type for the targets glint implements.
func (s *mixer) tensorType(t Tensor, nt dtype.Type) (dtype.Type, error) {
	name, ft, m := t.Name, s.ft, s.m
	nx := t.Dims[0]
	falcon := m.Arch == "falcon"
	gqa := 0
	if m.NHeadKV > 0 {
		gqa = m.NHead / m.NHeadKV
	}
	is70B := m.NExpert != 8 && m.Arch == "llama" && m.NLayer == 80 && m.NHead != m.NHeadKV
	switch {
	case name == "output.weight" || (!s.hasOutput && name == "token_embd.weight"):
		// The output head (or the embedding that serves as one) keeps more
		// bits.
		if falcon || nx%nt.BlockSize() != 0 {
			nt = dtype.Q8_0
		} else if nt != dtype.Q8_0 {
			nt = dtype.Q6_K
		}
	case name == "token_embd.weight":
		// Only the IQ1/IQ2/IQ3/TQ targets, which glint lacks, change it.
	case strings.Contains(name, "attn_v.weight"):
		switch {
		case ft == "Q2_K":
			nt = dtype.Q3_K
			if gqa >= 4 {
				nt = dtype.Q4_K
			}
		case ft == "Q3_K_M":
			nt = dtype.Q4_K
			if s.iAttnV < 2 {
				nt = dtype.Q5_K
			}
		case ft == "Q3_K_L":
			nt = dtype.Q5_K
		case (ft == "IQ4_NL" || ft == "IQ4_XS") && gqa >= 4:
			nt = dtype.Q5_K
		case (ft == "Q4_K_M" || ft == "Q5_K_M") && useMoreBits(s.iAttnV, s.nAttnV):
			nt = dtype.Q6_K
		case ft == "Q4_K_S" && s.iAttnV < 4:
			nt = dtype.Q5_K
		}
		if is70B && (nt == dtype.Q3_K || nt == dtype.Q4_K) {
			nt = dtype.Q5_K
		}
		if m.NExpert == 8 {
			nt = dtype.Q8_0
		}
		s.iAttnV++
	case strings.Contains(name, "attn_k.weight"):
		if m.NExpert == 8 {
			nt = dtype.Q8_0
		}
	case strings.Contains(name, "attn_q.weight"):
	case strings.Contains(name, "ffn_down"):
		i, n, err := s.layerInfo(s.iFFNDown, name)
		if err != nil {
			return 0, err
		}
		switch {
		case ft == "Q2_K":
			nt = dtype.Q3_K
		case ft == "Q3_K_M":
			switch {
			case i < n/16:
				nt = dtype.Q5_K
			case !falcon || useMoreBits(i, n):
				nt = dtype.Q4_K
			default:
				nt = dtype.Q3_K
			}
		case ft == "Q3_K_L":
			nt = dtype.Q5_K
			if falcon {
				nt = dtype.Q4_K
			}
		case ft == "Q4_K_M":
			if falcon {
				switch {
				case i < n/16:
					nt = dtype.Q6_K
				case useMoreBits(i, n):
					nt = dtype.Q5_K
				default:
					nt = dtype.Q4_K
				}
			} else if useMoreBits(i, n) {
				nt = dtype.Q6_K
			}
		case i < n/8 && (ft == "IQ4_NL" || ft == "IQ4_XS") && !m.HasImatx:
			nt = dtype.Q5_K
		case ft == "Q5_K_M" && useMoreBits(i, n):
			nt = dtype.Q6_K
		case ft == "Q4_K_S" && !falcon && i < n/8:
			nt = dtype.Q5_K
		case (ft == "Q4_0" || ft == "Q5_0") && m.HasImatx && i < n/8:
			nt = dtype.Q4_1
			if ft == "Q5_0" {
				nt = dtype.Q5_1
			}
		}
		s.iFFNDown++
	case strings.Contains(name, "attn_output.weight"):
		if !falcon {
			if m.NExpert == 8 {
				switch ft {
				case "Q2_K", "Q3_K_S", "Q3_K_M", "IQ4_NL", "Q4_K_S", "Q4_K_M", "IQ4_XS":
					nt = dtype.Q5_K
				}
			} else {
				switch ft {
				case "Q2_K":
					nt = dtype.Q3_K
				case "Q3_K_M":
					nt = dtype.Q4_K
				case "Q3_K_L":
					nt = dtype.Q5_K
				}
			}
		} else if ft == "Q3_K_L" {
			nt = dtype.Q4_K
		}
	case strings.Contains(name, "attn_qkv.weight"):
		switch ft {
		case "Q3_K_M", "Q3_K_L":
			nt = dtype.Q4_K
		case "Q4_K_M":
			nt = dtype.Q5_K
		case "Q5_K_M":
			nt = dtype.Q6_K
		}
	case strings.Contains(name, "ffn_gate"):
		if _, _, err := s.layerInfo(s.iFFNGate, name); err != nil {
			return 0, err
		}
		s.iFFNGate++
	case strings.Contains(name, "ffn_up"):
		if _, _, err := s.layerInfo(s.iFFNUp, name); err != nil {
			return 0, err
		}
		s.iFFNUp++
	}
	if nx%nt.BlockSize() == 0 {
		return nt, nil
	}
	// Rows that are not whole blocks of the chosen type fall back to a type
	// with 32-element blocks, then to F16.
	switch nt {
	case dtype.Q2_K, dtype.Q3_K, dtype.IQ4_XS:
		nt = dtype.IQ4_NL
	case dtype.Q4_K:
		nt = dtype.Q5_0
	case dtype.Q5_K:
		nt = dtype.Q5_1
	case dtype.Q6_K:
		nt = dtype.Q8_0
	default:
		return 0, fmt.Errorf("quant: tensor %q: rows of %d elements cannot be stored as %v (blocks of %d)", name, nx, nt, nt.BlockSize())
	}
	if nx%nt.BlockSize() != 0 {
		nt = dtype.F16
	}
	return nt, nil
}
