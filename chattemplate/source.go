package chattemplate

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/glint-llm/glint/model/gguf"
)

// ModelTemplate is what a model file says about chatting with it.
type ModelTemplate struct {
	// Source is the template text, "" when the model carries none.
	Source string
	// Origin says where Source came from, for messages.
	Origin string
	// BOS and EOS are the text of the model's special tokens ("" when it
	// has none), as transformers passes them as bos_token and eos_token.
	BOS, EOS string
}

// FromModel reads the template and special-token text of a GGUF file or a
// Hugging Face folder. A model without a template is not an error: Source
// is then "".
func FromModel(path string) (ModelTemplate, error) {
	st, err := os.Stat(path)
	if err != nil {
		return ModelTemplate{}, fmt.Errorf("chat template: %w", err)
	}
	if st.IsDir() {
		return FromHFDir(path)
	}
	f, err := gguf.Open(path)
	if err != nil {
		return ModelTemplate{}, err
	}
	defer f.Close()
	return FromGGUF(f)
}

// FromGGUF reads tokenizer.chat_template and the BOS/EOS token text.
func FromGGUF(f *gguf.File) (ModelTemplate, error) {
	var mt ModelTemplate
	if _, ok := f.Get("tokenizer.chat_template"); ok {
		s, err := f.String("tokenizer.chat_template")
		if err != nil {
			return mt, err
		}
		mt.Source, mt.Origin = s, "GGUF tokenizer.chat_template"
	}
	if _, ok := f.Get("tokenizer.ggml.tokens"); !ok {
		return mt, nil
	}
	tokens, err := f.Strings("tokenizer.ggml.tokens")
	if err != nil {
		return mt, err
	}
	for _, s := range []struct {
		key string
		dst *string
	}{{"tokenizer.ggml.bos_token_id", &mt.BOS}, {"tokenizer.ggml.eos_token_id", &mt.EOS}} {
		if _, ok := f.Get(s.key); !ok {
			continue
		}
		id, err := f.Uint(s.key)
		if err != nil {
			return mt, err
		}
		if id >= uint64(len(tokens)) {
			return mt, fmt.Errorf("gguf: %s = %d is outside the vocabulary of %d", s.key, id, len(tokens))
		}
		*s.dst = tokens[id]
	}
	return mt, nil
}

// FromHFDir reads a Hugging Face folder's template: chat_template.jinja,
// else chat_template.json, else tokenizer_config.json's "chat_template"
// (transformers' order), and bos_token/eos_token from tokenizer_config.json.
func FromHFDir(dir string) (ModelTemplate, error) {
	var mt ModelTemplate
	cfgPath := filepath.Join(dir, "tokenizer_config.json")
	var cfg struct {
		ChatTemplate json.RawMessage `json:"chat_template"`
		BOS          json.RawMessage `json:"bos_token"`
		EOS          json.RawMessage `json:"eos_token"`
	}
	if b, err := os.ReadFile(cfgPath); err == nil {
		if err := json.Unmarshal(b, &cfg); err != nil {
			return mt, fmt.Errorf("chat template: %s: %w", cfgPath, err)
		}
		var err error
		if mt.BOS, err = tokenText(cfg.BOS); err != nil {
			return mt, fmt.Errorf("chat template: %s: bos_token: %w", cfgPath, err)
		}
		if mt.EOS, err = tokenText(cfg.EOS); err != nil {
			return mt, fmt.Errorf("chat template: %s: eos_token: %w", cfgPath, err)
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return mt, fmt.Errorf("chat template: %w", err)
	}

	jinjaPath := filepath.Join(dir, "chat_template.jinja")
	if b, err := os.ReadFile(jinjaPath); err == nil {
		mt.Source, mt.Origin = string(b), jinjaPath
		return mt, nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return mt, fmt.Errorf("chat template: %w", err)
	}
	jsonPath := filepath.Join(dir, "chat_template.json")
	if b, err := os.ReadFile(jsonPath); err == nil {
		var ct struct {
			ChatTemplate json.RawMessage `json:"chat_template"`
		}
		if err := json.Unmarshal(b, &ct); err != nil {
			return mt, fmt.Errorf("chat template: %s: %w", jsonPath, err)
		}
		s, err := templateField(ct.ChatTemplate)
		if err != nil {
			return mt, fmt.Errorf("chat template: %s: %w", jsonPath, err)
		}
		mt.Source, mt.Origin = s, jsonPath
		return mt, nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return mt, fmt.Errorf("chat template: %w", err)
	}
	if len(cfg.ChatTemplate) > 0 {
		s, err := templateField(cfg.ChatTemplate)
		if err != nil {
			return mt, fmt.Errorf("chat template: %s: %w", cfgPath, err)
		}
		mt.Source, mt.Origin = s, cfgPath+" chat_template"
	}
	return mt, nil
}

// templateField reads "chat_template": a string, or a list of {name,
// template} of which transformers uses the one named "default".
func templateField(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, nil
	}
	var named []struct {
		Name     string `json:"name"`
		Template string `json:"template"`
	}
	if err := json.Unmarshal(raw, &named); err != nil {
		return "", errors.New("chat_template: want a string or a list of {name, template}")
	}
	for _, n := range named {
		if n.Name == "default" {
			return n.Template, nil
		}
	}
	return "", errors.New("chat_template: a list without a \"default\" template")
}

// tokenText reads a special token as tokenizer_config.json writes it: a
// string, null, or an AddedToken object with "content".
func tokenText(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, nil
	}
	var obj struct {
		Content *string `json:"content"`
	}
	if err := json.Unmarshal(raw, &obj); err != nil || obj.Content == nil {
		return "", errors.New("want a string, null or an object with \"content\"")
	}
	return *obj.Content, nil
}

// Choice says which template to use: a file, a built-in, or the model's.
type Choice struct {
	File    string // --chat-template-file
	Builtin string // --chat-template
}

// Resolve picks the template: File, else Builtin, else the model's own.
// mt is the model's (zero when there is no model).
func Resolve(c Choice, mt ModelTemplate) (*Template, error) {
	switch {
	case c.File != "":
		b, err := os.ReadFile(c.File)
		if err != nil {
			return nil, fmt.Errorf("chat template: %w", err)
		}
		return Parse(string(b), c.File)
	case c.Builtin != "":
		return Builtin(c.Builtin)
	case mt.Source != "":
		return Parse(mt.Source, mt.Origin)
	}
	return nil, fmt.Errorf("no chat template: the model carries none; choose one with --chat-template-file FILE or --chat-template %v", Builtins)
}
