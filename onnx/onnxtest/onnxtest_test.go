package onnxtest

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestValueInfoWire checks the encoder against bytes worked out by hand
// from the protobuf wire format (tag = field<<3 | wire type).
func TestValueInfoWire(t *testing.T) {
	got := encodeValueInfo(ValueInfo{Name: "x", Type: Int64, Dims: []Dim{P("b"), N(3)}})
	want := []byte{
		0x0a, 1, 'x', // name (1, bytes)
		0x12, 15, // type (2, bytes): TypeProto
		0x0a, 13, // tensor_type (1)
		0x08, 7, // elem_type (1, varint) = INT64
		0x12, 9, // shape (2)
		0x0a, 3, 0x12, 1, 'b', // dim { dim_param "b" }
		0x0a, 2, 0x08, 3, // dim { dim_value 3 }
	}
	if !bytes.Equal(got, want) {
		t.Errorf("ValueInfo bytes\n got %x\nwant %x", got, want)
	}
}

func TestTensorWire(t *testing.T) {
	cases := []struct {
		name string
		t    Tensor
		want []byte
	}{
		{"int64 vector", Tensor{Name: "c", Type: Int64, Dims: []int64{2}, Int64: []int64{1, -1}}, []byte{
			0x08, 2, // dims
			0x10, 7, // data_type
			0x42, 1, 'c', // name (8)
			0x4a, 16, 1, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // raw_data (9)
		}},
		{"float scalar", Tensor{Name: "f", Type: Float, Float: []float32{1}}, []byte{
			0x10, 1, 0x42, 1, 'f', 0x4a, 4, 0, 0, 0x80, 0x3f,
		}},
	}
	for _, c := range cases {
		if got := encodeTensor(&c.t); !bytes.Equal(got, c.want) {
			t.Errorf("%s\n got %x\nwant %x", c.name, got, c.want)
		}
	}
	// A multi-byte varint: 300 = 0xac 0x02.
	var b buf
	b.varint(1, 300)
	if !bytes.Equal(b.b, []byte{0x08, 0xac, 0x02}) {
		t.Errorf("varint 300: %x", b.b)
	}
}

// TestExternalData checks that large initializers leave the model file for
// the data file, 64-byte aligned, and small ones stay inline.
func TestExternalData(t *testing.T) {
	dir := t.TempDir()
	big := make([]float32, 300)
	for i := range big {
		big[i] = float32(i)
	}
	m := Model{Graph: Graph{Name: "g", Init: []*Tensor{
		{Name: "a", Type: Float, Dims: []int64{300}, Float: big},
		{Name: "small", Type: Int64, Dims: []int64{1}, Int64: []int64{5}},
		{Name: "b", Type: Float, Dims: []int64{300}, Float: big},
	}}}
	if err := m.Write(filepath.Join(dir, "m.onnx"), "m.data"); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(dir, "m.data"))
	if err != nil {
		t.Fatal(err)
	}
	// a at 0 (1200 bytes), b at the next multiple of 64: 1216.
	if len(data) != 1216+1200 {
		t.Errorf("data file has %d bytes, want %d", len(data), 1216+1200)
	}
	model, _ := os.ReadFile(filepath.Join(dir, "m.onnx"))
	for _, s := range []string{"m.data", "location", "offset", "1216", "length", "1200"} {
		if !bytes.Contains(model, []byte(s)) {
			t.Errorf("model does not reference %q", s)
		}
	}
	if len(model) > 1000 {
		t.Errorf("model file is %d bytes: the weights were not moved out", len(model))
	}
}

func TestGemmaVocab(t *testing.T) {
	toks, merges := gemmaVocab(320)
	if len(toks) != 320 {
		t.Fatalf("%d tokens, want 320", len(toks))
	}
	ids := map[string]int{}
	for i, s := range toks {
		if _, dup := ids[s]; dup {
			t.Fatalf("token %q twice", s)
		}
		ids[s] = i
	}
	for s, id := range map[string]int{"<pad>": PadID, "<eos>": EOSID, "<bos>": BOSID, "<unk>": UnkID,
		"<end_of_turn>": EndOfTurnID, "<0x00>": firstByteID, "<0x41>": firstByteID + 0x41, "<0xFF>": firstByteID + 255,
		"▁": firstPieceID, "a": firstPieceID + 1, "▁the": ids["▁the"]} {
		if ids[s] != id {
			t.Errorf("%q has id %d, want %d", s, ids[s], id)
		}
	}
	if _, ok := ids["▁the"]; !ok {
		t.Error("no ▁the piece")
	}
	// Each merge joins two known tokens into a token that comes later.
	for _, mg := range merges {
		l, okl := ids[mg[0]]
		r, okr := ids[mg[1]]
		j, okj := ids[mg[0]+mg[1]]
		if !okl || !okr || !okj || j <= l || j <= r {
			t.Errorf("merge %q: ids %d+%d → %d", mg, l, r, j)
		}
	}
	big, _ := gemmaVocab(262144)
	if len(big) != 262144 || !strings.HasPrefix(big[262143], "<unused") {
		t.Errorf("full-size vocab: %d tokens, last %q", len(big), big[len(big)-1])
	}
}

func TestWriteGemmaLikeFiles(t *testing.T) {
	dir := t.TempDir()
	if err := WriteGemmaLike(dir, GemmaOptions{Layers: 2, Vocab: 300, ExternalData: "model.onnx_data"}); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"model.onnx", "model.onnx_data", "config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Error(err)
		}
	}
	var tok struct {
		Model struct {
			Type         string         `json:"type"`
			ByteFallback bool           `json:"byte_fallback"`
			Vocab        map[string]int `json:"vocab"`
		} `json:"model"`
	}
	data, _ := os.ReadFile(filepath.Join(dir, "tokenizer.json"))
	if err := json.Unmarshal(data, &tok); err != nil {
		t.Fatal(err)
	}
	if tok.Model.Type != "BPE" || !tok.Model.ByteFallback || len(tok.Model.Vocab) != 300 || tok.Model.Vocab["<bos>"] != BOSID {
		t.Errorf("tokenizer.json model: type %q byte_fallback %v, %d tokens", tok.Model.Type, tok.Model.ByteFallback, len(tok.Model.Vocab))
	}
	var tc struct {
		AddBOS bool `json:"add_bos_token"`
	}
	data, _ = os.ReadFile(filepath.Join(dir, "tokenizer_config.json"))
	if err := json.Unmarshal(data, &tc); err != nil || !tc.AddBOS {
		t.Errorf("tokenizer_config.json: add_bos_token %v, %v", tc.AddBOS, err)
	}
}

func TestGemmaOptionErrors(t *testing.T) {
	for _, o := range []GemmaOptions{{Vocab: 100}, {KVHeads: 2}, {HeadDim: 7}, {Layers: -1}} {
		if err := WriteGemmaLike(t.TempDir(), o); err == nil {
			t.Errorf("%+v: no error", o)
		}
	}
}
