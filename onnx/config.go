package onnx

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// defaultContext is used when no config file states the context length.
const defaultContext = 2048

// names are the graph names the runner binds, with KV names as patterns in
// which (\d+) captures the layer index.
type names struct {
	ids, mask, pos, logits string
	pastKey, pastValue     *regexp.Regexp // past_key_values.N.key / .value
	presentKey, presentVal *regexp.Regexp // present.N.key / .value
	pastStacked            *regexp.Regexp // past_N: [2, batch, heads, seq, head_dim]
	presentStacked         *regexp.Regexp
	// the printf forms of pastKey and pastStacked, for messages
	pastKeyFmt, pastStackedFmt string
}

// fileConfig is what Open learns from the folder before loading the graph.
type fileConfig struct {
	decoder string // the .onnx file
	names   names
	bos     int32 // -1 when unknown
	pad     int32 // -1 when unknown
	eos     []int32
	context int
	vocab   int // 0 when unknown (then the logits shape must say)
	kvHeads int // hints for dynamic KV dims; 0 when unknown
	headDim int
	source  string // which config file described the model
}

// genaiConfig is the part of ONNX Runtime GenAI's genai_config.json we use.
type genaiConfig struct {
	Model struct {
		BOS     *int32          `json:"bos_token_id"`
		EOS     json.RawMessage `json:"eos_token_id"`
		Pad     *int32          `json:"pad_token_id"`
		Vocab   int             `json:"vocab_size"`
		Context int             `json:"context_length"`
		Decoder struct {
			Filename string `json:"filename"`
			KVHeads  int    `json:"num_key_value_heads"`
			HeadSize int    `json:"head_size"`
			Inputs   struct {
				InputIDs       string `json:"input_ids"`
				AttentionMask  string `json:"attention_mask"`
				PositionIDs    string `json:"position_ids"`
				PastKeyNames   string `json:"past_key_names"`
				PastValueNames string `json:"past_value_names"`
				PastNames      string `json:"past_names"`
			} `json:"inputs"`
			Outputs struct {
				Logits            string `json:"logits"`
				PresentKeyNames   string `json:"present_key_names"`
				PresentValueNames string `json:"present_value_names"`
				PresentNames      string `json:"present_names"`
			} `json:"outputs"`
		} `json:"decoder"`
	} `json:"model"`
}

// hfConfig covers config.json and generation_config.json keys across the
// Llama, Gemma and GPT-2 families.
type hfConfig struct {
	BOS        *int32          `json:"bos_token_id"`
	EOS        json.RawMessage `json:"eos_token_id"`
	Pad        *int32          `json:"pad_token_id"`
	Vocab      int             `json:"vocab_size"`
	MaxPos     int             `json:"max_position_embeddings"`
	NPositions int             `json:"n_positions"`
	KVHeads    int             `json:"num_key_value_heads"`
	HeadDim    int             `json:"head_dim"`
}

// pattern turns a GenAI printf-style name ("past_key_values.%d.key") into a
// regexp capturing the layer index.
func pattern(printf, def string) (*regexp.Regexp, error) {
	if printf == "" {
		printf = def
	}
	if strings.Count(printf, "%d") != 1 {
		return nil, fmt.Errorf("KV name pattern %q must contain exactly one %%d", printf)
	}
	i := strings.Index(printf, "%d")
	return regexp.MustCompile("^" + regexp.QuoteMeta(printf[:i]) + `(\d+)` + regexp.QuoteMeta(printf[i+2:]) + "$"), nil
}

func or(s, def string) string {
	if s != "" {
		return s
	}
	return def
}

// parseIDs reads an eos_token_id that is a number or a list of numbers.
func parseIDs(raw json.RawMessage) ([]int32, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var one int32
	if err := json.Unmarshal(raw, &one); err == nil {
		return []int32{one}, nil
	}
	var many []int32
	if err := json.Unmarshal(raw, &many); err != nil {
		return nil, fmt.Errorf("eos_token_id %s is neither a number nor a list of numbers", raw)
	}
	return many, nil
}

func readJSON(path string, v any) (bool, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("onnx: %w", err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		return false, fmt.Errorf("onnx: %s: %w", path, err)
	}
	return true, nil
}

// readConfig locates the decoder and its settings in dir (or next to dir
// when dir is an .onnx file): genai_config.json when present, else
// model.onnx or the single *.onnx (also under onnx/, the Hugging Face
// onnx-community layout) with config.json and generation_config.json.
func readConfig(dir string) (*fileConfig, error) {
	st, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("onnx: %w", err)
	}
	fc := &fileConfig{bos: -1, pad: -1}
	explicit := ""
	if !st.IsDir() {
		explicit, dir = dir, filepath.Dir(dir)
	}

	var gc genaiConfig
	genaiPath := filepath.Join(dir, "genai_config.json")
	hasGenai, err := readJSON(genaiPath, &gc)
	if err != nil {
		return nil, err
	}
	gm := gc.Model
	gi, gout := gm.Decoder.Inputs, gm.Decoder.Outputs
	n := &fc.names
	n.ids = or(gi.InputIDs, "input_ids")
	n.mask = or(gi.AttentionMask, "attention_mask")
	n.pos = or(gi.PositionIDs, "position_ids")
	n.logits = or(gout.Logits, "logits")
	n.pastKeyFmt = or(gi.PastKeyNames, "past_key_values.%d.key")
	n.pastStackedFmt = or(gi.PastNames, "past_%d")
	for _, p := range []struct {
		dst         **regexp.Regexp
		printf, def string
	}{
		{&n.pastKey, gi.PastKeyNames, "past_key_values.%d.key"},
		{&n.pastValue, gi.PastValueNames, "past_key_values.%d.value"},
		{&n.pastStacked, gi.PastNames, "past_%d"},
		{&n.presentKey, gout.PresentKeyNames, "present.%d.key"},
		{&n.presentVal, gout.PresentValueNames, "present.%d.value"},
		{&n.presentStacked, gout.PresentNames, "present_%d"},
	} {
		re, err := pattern(p.printf, p.def)
		if err != nil {
			return nil, fmt.Errorf("onnx: %s: %w", genaiPath, err)
		}
		*p.dst = re
	}

	if hasGenai {
		fc.source = genaiPath
		if gm.Decoder.Filename == "" {
			return nil, fmt.Errorf("onnx: %s: model.decoder.filename is empty", genaiPath)
		}
		fc.decoder = filepath.Join(dir, gm.Decoder.Filename)
		if gm.BOS != nil {
			fc.bos = *gm.BOS
		}
		if gm.Pad != nil {
			fc.pad = *gm.Pad
		}
		if fc.eos, err = parseIDs(gm.EOS); err != nil {
			return nil, fmt.Errorf("onnx: %s: %w", genaiPath, err)
		}
		fc.vocab, fc.context = gm.Vocab, gm.Context
		fc.kvHeads, fc.headDim = gm.Decoder.KVHeads, gm.Decoder.HeadSize
	} else {
		var hc, gen hfConfig
		cfgPath := filepath.Join(dir, "config.json")
		ok, err := readJSON(cfgPath, &hc)
		if err != nil {
			return nil, err
		}
		if ok {
			fc.source = cfgPath
		}
		if _, err := readJSON(filepath.Join(dir, "generation_config.json"), &gen); err != nil {
			return nil, err
		}
		for _, c := range []*hfConfig{&hc, &gen} { // generation_config.json wins
			if c.BOS != nil {
				fc.bos = *c.BOS
			}
			if c.Pad != nil {
				fc.pad = *c.Pad
			}
			eos, err := parseIDs(c.EOS)
			if err != nil {
				return nil, fmt.Errorf("onnx: %s: %w", dir, err)
			}
			if eos != nil {
				fc.eos = eos
			}
		}
		fc.vocab, fc.kvHeads, fc.headDim = hc.Vocab, hc.KVHeads, hc.HeadDim
		fc.context = hc.MaxPos
		if fc.context == 0 {
			fc.context = hc.NPositions
		}
		if explicit != "" {
			fc.decoder = explicit
		} else if fc.decoder, err = findONNX(dir); err != nil {
			return nil, err
		}
	}
	if explicit != "" {
		fc.decoder = explicit
	}
	if fc.context <= 0 {
		fc.context = defaultContext
	}
	if _, err := os.Stat(fc.decoder); err != nil {
		return nil, fmt.Errorf("onnx: decoder: %w", err)
	}
	return fc, nil
}

// findONNX picks the decoder file of a folder without genai_config.json.
func findONNX(dir string) (string, error) {
	for _, d := range []string{dir, filepath.Join(dir, "onnx")} {
		p := filepath.Join(d, "model.onnx")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
		found, _ := filepath.Glob(filepath.Join(d, "*.onnx"))
		sort.Strings(found)
		switch len(found) {
		case 0:
			continue
		case 1:
			return found[0], nil
		default:
			return "", fmt.Errorf("onnx: %s holds %d .onnx files and no model.onnx or genai_config.json to choose: %s",
				d, len(found), strings.Join(baseNames(found), ", "))
		}
	}
	return "", fmt.Errorf("onnx: no .onnx model in %s (looked for genai_config.json, model.onnx, *.onnx and onnx/*.onnx)", dir)
}

func baseNames(paths []string) []string {
	out := make([]string, len(paths))
	for i, p := range paths {
		out[i] = filepath.Base(p)
	}
	return out
}

// layerOf returns the layer index captured by re, or -1.
func layerOf(re *regexp.Regexp, name string) int {
	m := re.FindStringSubmatch(name)
	if m == nil {
		return -1
	}
	i, err := strconv.Atoi(m[1])
	if err != nil {
		return -1
	}
	return i
}
