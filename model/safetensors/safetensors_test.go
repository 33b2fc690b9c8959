package safetensors

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/glint-llm/glint/dtype"
)

// f32Bytes stores v as little-endian float32s.
func f32Bytes(v ...float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

// rawFile assembles a file from a header string and data, to build hostile
// inputs the writer would refuse to produce.
func rawFile(hdr string, data []byte) []byte {
	b := binary.LittleEndian.AppendUint64(nil, uint64(len(hdr)))
	b = append(b, hdr...)
	return append(b, data...)
}

func TestWriteParseRoundTrip(t *testing.T) {
	w := NewWriter()
	w.SetMetadata("format", "pt")
	f16 := []byte{0x00, 0x3c, 0x00, 0xc0} // 1, -2
	bf16 := []byte{0x80, 0x3f, 0x40, 0x40, 0x00, 0x00}
	tensors := []struct {
		name  string
		dt    dtype.Type
		shape []int
		data  []byte
	}{
		{"model.embed_tokens.weight", dtype.F32, []int{2, 3}, f32Bytes(1, 2, 3, 4, 5, 6)},
		{"a.f16", dtype.F16, []int{2}, f16},
		{"b.bf16", dtype.BF16, []int{3, 1}, bf16},
		{"scalar", dtype.F32, []int{}, f32Bytes(7)},
		{"empty", dtype.F32, []int{0, 4}, nil},
		{"ids", dtype.I32, []int{1}, []byte{1, 0, 0, 0}},
	}
	for _, tc := range tensors {
		if err := w.Add(tc.name, tc.dt, tc.shape, tc.data); err != nil {
			t.Fatal(err)
		}
	}
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	hdrLen := binary.LittleEndian.Uint64(buf.Bytes())
	if (8+hdrLen)%8 != 0 {
		t.Errorf("data section starts at %d, not 8-aligned", 8+hdrLen)
	}
	// The header must be plain JSON that any reader accepts.
	var generic map[string]any
	if err := json.Unmarshal(buf.Bytes()[8:8+hdrLen], &generic); err != nil {
		t.Fatalf("header is not JSON: %v", err)
	}
	f, err := Parse(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if f.Metadata["format"] != "pt" {
		t.Errorf("metadata = %v", f.Metadata)
	}
	if got, want := f.Names(), []string{"model.embed_tokens.weight", "a.f16", "b.bf16", "scalar", "empty", "ids"}; !slices.Equal(got, want) {
		t.Errorf("names %v, want %v", got, want)
	}
	for _, tc := range tensors {
		td, err := f.Tensor(tc.name)
		if err != nil {
			t.Fatal(err)
		}
		if td.Type != tc.dt || !slices.Equal(td.Shape, tc.shape) || !bytes.Equal(td.Data, tc.data) {
			t.Errorf("%s: got %v %v %x, want %v %v %x", tc.name, td.Type, td.Shape, td.Data, tc.dt, tc.shape, tc.data)
		}
	}
	if _, err := f.Tensor("nope"); err == nil || !strings.Contains(err.Error(), `"nope"`) {
		t.Errorf("missing tensor: err = %v", err)
	}
}

func TestWriterRejects(t *testing.T) {
	for _, tc := range []struct {
		name string
		add  func(w *Writer) error
		want string
	}{
		{"quantized type", func(w *Writer) error { return w.Add("x", dtype.Q4_0, []int{32}, make([]byte, 18)) }, "cannot be stored"},
		{"duplicate", func(w *Writer) error {
			w.Add("x", dtype.F32, []int{1}, f32Bytes(1))
			return w.Add("x", dtype.F32, []int{1}, f32Bytes(1))
		}, "twice"},
		{"reserved name", func(w *Writer) error { return w.Add("__metadata__", dtype.F32, []int{1}, f32Bytes(1)) }, "invalid tensor name"},
		{"short data", func(w *Writer) error {
			if err := w.Add("x", dtype.F32, []int{2}, f32Bytes(1)); err != nil {
				return err
			}
			_, err := w.WriteTo(&bytes.Buffer{})
			return err
		}, "wrote 4 bytes, want 8"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.add(NewWriter())
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to mention %q", err, tc.want)
			}
		})
	}
}

func TestParseRejectsHostileInput(t *testing.T) {
	eight := make([]byte, 8)
	for _, tc := range []struct {
		name string
		file []byte
		want string
	}{
		{"empty", nil, "shorter than"},
		{"huge header length", binary.LittleEndian.AppendUint64(nil, 1<<62), "exceeds the limit"},
		{"header past end", binary.LittleEndian.AppendUint64(nil, 100), "past the end"},
		{"not an object", rawFile(`[1,2]`, nil), "not a JSON object"},
		{"truncated json", rawFile(`{"a":{"dtype":"F32"`, nil), `tensor "a"`},
		{"unknown dtype", rawFile(`{"a":{"dtype":"F64","shape":[1],"data_offsets":[0,8]}}`, eight), `unsupported dtype "F64"`},
		{"missing shape", rawFile(`{"a":{"dtype":"F32","data_offsets":[0,4]}}`, eight[:4]), "missing shape"},
		{"negative dim", rawFile(`{"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}}`, eight[:4]), "negative dimension"},
		{"overflowing shape", rawFile(`{"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,4]}}`, eight[:4]), "overflows"},
		{"offsets count", rawFile(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0]}}`, eight[:4]), "want 2"},
		{"offset past data", rawFile(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, eight[:4]), "outside"},
		{"reversed offsets", rawFile(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[4,0]}}`, eight), "outside"},
		{"size mismatch", rawFile(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,8]}}`, eight), "needs 4"},
		{"overlap", rawFile(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"F16","shape":[2],"data_offsets":[2,6]}}`, eight[:6]), "overlap"},
		{"gap", rawFile(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, eight), "gap"},
		{"trailing data", rawFile(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}`, eight), "cover 4 bytes of a 8-byte"},
		{"duplicate tensor", rawFile(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, eight), "twice"},
		{"bad metadata", rawFile(`{"__metadata__":{"k":1}}`, nil), "__metadata__"},
		{"garbage after object", rawFile(`{} x`, nil), "unexpected bytes"},
		{"field name case", rawFile(`{"a":{"DType":"F32","shape":[1],"data_offsets":[0,4]}}`, eight[:4]), "missing dtype"},
		{"empty name", rawFile(`{"":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}`, eight[:4]), "empty tensor name"},
		{"fractional offset", rawFile(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4.5]}}`, eight[:4]), `tensor "a"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(tc.file)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to mention %q", err, tc.want)
			}
			if !strings.HasPrefix(err.Error(), "safetensors: ") {
				t.Errorf("error %q does not say where it comes from", err)
			}
		})
	}
}

func TestOpenFileAndShards(t *testing.T) {
	dir := t.TempDir()
	// One model split over two shards plus the same model in one file: the
	// two must read back identically.
	all := map[string][]byte{"w.a": f32Bytes(1, 2), "w.b": f32Bytes(3), "w.c": f32Bytes(4, 5, 6)}
	shardOf := map[string]string{"w.a": "model-00001-of-00002.safetensors", "w.b": "model-00001-of-00002.safetensors", "w.c": "model-00002-of-00002.safetensors"}
	single := NewWriter()
	shards := map[string]*Writer{}
	for _, name := range []string{"w.a", "w.b", "w.c"} {
		shape := []int{len(all[name]) / 4}
		single.Add(name, dtype.F32, shape, all[name])
		s := shards[shardOf[name]]
		if s == nil {
			s = NewWriter()
			shards[shardOf[name]] = s
		}
		s.Add(name, dtype.F32, shape, all[name])
	}
	sdir := filepath.Join(dir, "sharded")
	os.Mkdir(sdir, 0o755)
	for file, w := range shards {
		if err := w.WriteFile(filepath.Join(sdir, file)); err != nil {
			t.Fatal(err)
		}
	}
	idx, _ := json.Marshal(map[string]any{"metadata": map[string]any{"total_size": 24}, "weight_map": shardOf})
	os.WriteFile(filepath.Join(sdir, IndexName), idx, 0o644)
	udir := filepath.Join(dir, "single")
	os.Mkdir(udir, 0o755)
	if err := single.WriteFile(filepath.Join(udir, SingleName)); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{sdir, udir} {
		s, err := OpenDir(d)
		if err != nil {
			t.Fatal(err)
		}
		for name, want := range all {
			td, err := s.Tensor(name)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(td.Data, want) || !s.Has(name) {
				t.Errorf("%s: %s = %x, want %x", d, name, td.Data, want)
			}
		}
		if got := len(s.Names()); got != 3 {
			t.Errorf("%s: %d names", d, got)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}

	for _, tc := range []struct {
		name  string
		index string
		want  string
	}{
		{"escaping shard", `{"weight_map":{"w.a":"../x.safetensors"}}`, "not a file in the index's folder"},
		{"missing shard", `{"weight_map":{"w.a":"nope.safetensors"}}`, "nope.safetensors"},
		{"tensor not in shard", `{"weight_map":{"w.z":"model-00001-of-00002.safetensors"}}`, `tensor "w.z" is not in its shard`},
		{"empty map", `{"weight_map":{}}`, "empty or missing weight_map"},
		{"not json", `{`, IndexName},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(sdir, IndexName)
			os.WriteFile(p, []byte(tc.index), 0o644)
			_, err := OpenIndex(p)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to mention %q", err, tc.want)
			}
		})
	}
	if _, err := Open(filepath.Join(dir, "absent.safetensors")); err == nil {
		t.Error("opening a missing file succeeded")
	}
	empty := filepath.Join(dir, "empty.safetensors")
	os.WriteFile(empty, nil, 0o644)
	if _, err := Open(empty); err == nil || !strings.Contains(err.Error(), empty) {
		t.Errorf("empty file: err = %v", err)
	}
}

// FuzzParse checks that no input makes Parse panic, and that whatever it
// accepts is self-consistent: every tensor's bytes lie inside the input and
// match its type and shape, and writing the tensors back gives a file that
// parses to the same tensors.
func FuzzParse(f *testing.F) {
	w := NewWriter()
	w.SetMetadata("format", "pt")
	w.Add("a", dtype.F32, []int{2, 2}, f32Bytes(1, 2, 3, 4))
	w.Add("b", dtype.BF16, []int{3}, make([]byte, 6))
	var buf bytes.Buffer
	w.WriteTo(&buf)
	f.Add(buf.Bytes())
	f.Add(rawFile(`{}`, nil))
	f.Add(rawFile(`{"a":{"dtype":"F16","shape":[],"data_offsets":[0,2]}}`, []byte{0, 0x3c}))
	f.Add(rawFile(`{"__metadata__":{"a":"b"},"x":{"dtype":"I32","shape":[0],"data_offsets":[0,0]}}`, nil))
	f.Add(rawFile(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"F16","shape":[2],"data_offsets":[2,6]}}`, make([]byte, 6)))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := Parse(b)
		if err != nil {
			return
		}
		w := NewWriter()
		for k, v := range p.Metadata {
			w.SetMetadata(k, v)
		}
		for _, name := range p.Names() {
			td, err := p.Tensor(name)
			if err != nil {
				t.Fatalf("listed tensor %q: %v", name, err)
			}
			want, err := td.Type.Bytes(td.Shape...)
			if err != nil || want != len(td.Data) {
				t.Fatalf("%q: %d bytes for %v %v (%v)", name, len(td.Data), td.Type, td.Shape, err)
			}
			if err := w.Add(name, td.Type, td.Shape, td.Data); err != nil {
				t.Fatalf("rewriting %q: %v", name, err)
			}
		}
		var out bytes.Buffer
		if _, err := w.WriteTo(&out); err != nil {
			t.Fatal(err)
		}
		q, err := Parse(out.Bytes())
		if err != nil {
			t.Fatalf("rewritten file does not parse: %v", err)
		}
		if !slices.Equal(q.Names(), p.Names()) {
			t.Fatalf("names %v → %v", p.Names(), q.Names())
		}
		for _, name := range p.Names() {
			a, _ := p.Tensor(name)
			b, _ := q.Tensor(name)
			if a.Type != b.Type || !slices.Equal(a.Shape, b.Shape) || !bytes.Equal(a.Data, b.Data) {
				t.Fatalf("%q changed in the round trip", name)
			}
		}
	})
}
