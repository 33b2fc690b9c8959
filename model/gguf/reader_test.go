package gguf

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/glint-llm/glint/dtype"
)

func TestTensorRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sample.gguf")
	w := NewWriter()
	for i, c := range tensorCases() {
		must(t, w.AddTensor(c.name, c.dt, c.shape, randomBytes(uint64(i), c.size)))
	}
	must(t, w.WriteFile(path))
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.Version != 3 || f.Alignment != 32 || f.DataOffset%32 != 0 {
		t.Errorf("version %d alignment %d data offset %d", f.Version, f.Alignment, f.DataOffset)
	}
	if len(f.Tensors) != len(tensorCases()) {
		t.Fatalf("%d tensors, want %d", len(f.Tensors), len(tensorCases()))
	}
	for i, c := range tensorCases() {
		t.Run(c.name, func(t *testing.T) {
			if f.Tensors[i].Name != c.name {
				t.Fatalf("tensor %d is %q (file order)", i, f.Tensors[i].Name)
			}
			data, ti, err := f.TensorData(c.name)
			if err != nil {
				t.Fatal(err)
			}
			dims := make([]uint64, len(c.shape))
			for j, d := range c.shape {
				dims[len(dims)-1-j] = uint64(d)
			}
			if ti.Type != c.dt || !reflect.DeepEqual(ti.Dims, dims) || !reflect.DeepEqual(ti.Shape(), c.shape) || ti.Size != int64(c.size) {
				t.Errorf("info %+v, want %v dims %v shape %v size %d", ti, c.dt, dims, c.shape, c.size)
			}
			if ti.Offset%32 != 0 {
				t.Errorf("offset %d not aligned", ti.Offset)
			}
			if !bytes.Equal(data, randomBytes(uint64(i), c.size)) {
				t.Error("data differs")
			}
			td, err := f.Tensor(c.name)
			if err != nil || td.Type != c.dt || !reflect.DeepEqual(td.Shape, c.shape) || !bytes.Equal(td.Data, data) || td.Name != c.name {
				t.Errorf("Tensor = %+v, %v", td, err)
			}
			if !f.Has(c.name) {
				t.Error("Has = false")
			}
		})
	}
	if f.Has("nope") {
		t.Error("Has(nope) = true")
	}
	if _, err := f.Tensor("nope"); !errors.Is(err, ErrMissing) || !strings.Contains(err.Error(), `tensor "nope": missing`) {
		t.Errorf("Tensor(nope) err = %v", err)
	}
	must(t, f.Close())
	must(t, f.Close())
	if _, _, err := f.TensorData("q8_0"); !errors.Is(err, ErrClosed) {
		t.Errorf("after Close: %v", err)
	}
}

func TestAlignment(t *testing.T) {
	w := NewWriter()
	must(t, w.Add("general.alignment", uint32(256)))
	must(t, w.AddTensor("a", dtype.F32, []int{3}, make([]byte, 12)))
	must(t, w.AddTensor("b", dtype.F16, []int{5}, randomBytes(9, 10)))
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	f, err := Parse(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	b, _ := f.Info("b")
	if f.Alignment != 256 || f.DataOffset%256 != 0 || b.Offset != 256 || int64(buf.Len()) != f.DataOffset+512 {
		t.Errorf("alignment %d, data offset %d, b at %d, file %d bytes", f.Alignment, f.DataOffset, b.Offset, buf.Len())
	}
	if d, _, _ := f.TensorData("b"); !bytes.Equal(d, randomBytes(9, 10)) {
		t.Error("b's data differs")
	}
}

func TestAddTensorFunc(t *testing.T) {
	want := randomBytes(3, 34*4)
	cases := []struct {
		name  string
		write func(io.Writer) error
		err   string
	}{
		{"exact, in pieces", func(w io.Writer) error {
			_, err := w.Write(want[:50])
			if err == nil {
				_, err = w.Write(want[50:])
			}
			return err
		}, ""},
		{"short", func(w io.Writer) error { _, err := w.Write(want[:10]); return err }, `tensor "t": wrote 10 bytes, want 136`},
		{"long", func(w io.Writer) error { _, err := w.Write(append(want, 0)); return err }, `wrote 137 bytes, want 136`},
		{"failing", func(io.Writer) error { return errors.New("disk on fire") }, `tensor "t": disk on fire`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := NewWriter()
			must(t, w.AddTensorFunc("t", dtype.Q8_0, []int{2, 64}, c.write))
			path := filepath.Join(t.TempDir(), "m.gguf")
			err := w.WriteFile(path)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("err = %v, want %q", err, c.err)
				}
				if ents, _ := os.ReadDir(filepath.Dir(path)); len(ents) != 0 {
					t.Errorf("failed write left %v behind", ents[0].Name())
				}
				return
			}
			must(t, err)
			f, err := Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if d, _, err := f.TensorData("t"); err != nil || !bytes.Equal(d, want) {
				t.Errorf("data differs (%v)", err)
			}
		})
	}
}

func TestWriterErrors(t *testing.T) {
	w := NewWriter()
	must(t, w.Add("k", "v"))
	must(t, w.AddTensor("t", dtype.F32, []int{1}, make([]byte, 4)))
	cases := []struct {
		name string
		err  error
		want string
	}{
		{"duplicate key", w.Add("k", "v"), `key "k": duplicate`},
		{"bad go type", w.Add("x", 1), `key "x": gguf: cannot store a int`},
		{"alignment not power of two", w.Add("general.alignment", uint32(48)), "want a UINT32 power of two"},
		{"alignment zero", w.Add("general.alignment", uint32(0)), "want a UINT32 power of two"},
		{"alignment wrong type", w.Add("general.alignment", uint64(64)), "UINT64 64, want a UINT32"},
		{"duplicate tensor", w.AddTensor("t", dtype.F32, []int{1}, make([]byte, 4)), `tensor "t": duplicate name`},
		{"unsupported type", w.AddTensor("iq2", 16, []int{256}, make([]byte, 66)), `tensor "iq2": type IQ2_XXS (16) is not supported`},
		{"5 dims", w.AddTensor("t5", dtype.F32, []int{1, 1, 1, 1, 1}, make([]byte, 4)), "more than 4 dimensions"},
		{"negative dim", w.AddTensor("neg", dtype.F32, []int{-1, 4}, nil), "negative dimension"},
		{"partial block", w.AddTensor("q", dtype.Q4_0, []int{2, 33}, nil), "not a multiple of the block size"},
		{"wrong length", w.AddTensor("l", dtype.F16, []int{3, 2}, make([]byte, 11)), `tensor "l": 11 bytes of data, want 12 for F16 [3 2]`},
		{"nil func", w.AddTensorFunc("f", dtype.F32, []int{1}, nil), "nil write function"},
		{"bad path", NewWriter().WriteFile(filepath.Join(t.TempDir(), "no", "such", "dir.gguf")), "no such file"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.err == nil || !strings.Contains(c.err.Error(), c.want) || !strings.HasPrefix(c.err.Error(), "gguf: ") {
				t.Fatalf("err = %v, want it to contain %q", c.err, c.want)
			}
		})
	}
	// Failed calls must not have changed the file.
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	f, err := Parse(buf.Bytes())
	if err != nil || len(f.KV) != 1 || len(f.Tensors) != 1 || f.Alignment != 32 {
		t.Fatalf("after failed adds: %v, %+v", err, f)
	}
}

func TestGetters(t *testing.T) {
	path := filepath.Join(t.TempDir(), "g.gguf")
	w := NewWriter()
	must(t, w.Add("llama.block_count", uint32(5)))
	must(t, w.Add("eps", float32(0.5)))
	must(t, w.Add("name", "tiny"))
	must(t, w.Add("neg", int32(-3)))
	must(t, w.Add("flag", true))
	must(t, w.Add("toks", []string{"a", "b"}))
	must(t, w.Add("scores", []float32{1, 2}))
	must(t, w.Add("types", []int32{1, 6}))
	must(t, w.WriteFile(path))
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()

	if n, err := f.Uint("llama.block_count"); n != 5 || err != nil {
		t.Errorf("Uint = %d, %v", n, err)
	}
	if n, err := f.Int("neg"); n != -3 || err != nil {
		t.Errorf("Int = %d, %v", n, err)
	}
	if x, err := f.Float("eps"); x != 0.5 || err != nil {
		t.Errorf("Float = %v, %v", x, err)
	}
	if s, err := f.String("name"); s != "tiny" || err != nil {
		t.Errorf("String = %q, %v", s, err)
	}
	if b, err := f.Bool("flag"); !b || err != nil {
		t.Errorf("Bool = %v, %v", b, err)
	}
	if s, err := f.Strings("toks"); !reflect.DeepEqual(s, []string{"a", "b"}) || err != nil {
		t.Errorf("Strings = %v, %v", s, err)
	}
	if s, err := f.Float32s("scores"); !reflect.DeepEqual(s, []float32{1, 2}) || err != nil {
		t.Errorf("Float32s = %v, %v", s, err)
	}
	if s, err := f.Int32s("types"); !reflect.DeepEqual(s, []int32{1, 6}) || err != nil {
		t.Errorf("Int32s = %v, %v", s, err)
	}

	errs := []struct {
		err    error
		is     error
		prefix string
	}{
		{second(f.Uint("missing")), ErrMissing, `key "missing": missing`},
		{second(f.Uint("neg")), ErrType, `key "neg": wrong type: INT32 -3, want an unsigned integer`},
		{second(f.Int("name")), ErrType, `key "name": wrong type: STRING tiny, want an int64`},
		{second(f.Float("flag")), ErrType, `key "flag": wrong type: BOOL true, want a number`},
		{second(f.String("llama.block_count")), ErrType, `key "llama.block_count": wrong type: UINT32 5, want a string`},
		{second(f.Bool("eps")), ErrType, `key "eps": wrong type: FLOAT32 0.5, want a bool`},
		{second(f.Strings("scores")), ErrType, `key "scores": wrong type: ARRAY of FLOAT32 of 2, want an array of strings`},
		{second(f.Float32s("toks")), ErrType, `key "toks": wrong type: ARRAY of STRING of 2, want an array of floats`},
		{second(f.Int32s("name")), ErrType, `key "name": wrong type: STRING tiny, want an array of int32-sized integers`},
	}
	for _, e := range errs {
		want := "gguf: " + path + ": " + e.prefix
		if !errors.Is(e.err, e.is) || e.err == nil || !strings.HasPrefix(e.err.Error(), want) {
			t.Errorf("err = %v, want %v starting %q", e.err, e.is, want)
		}
	}
}

func second[T any](_ T, err error) error { return err }

// TestTruncated parses every proper prefix of a valid file: each must fail
// cleanly (the file has no trailing padding, so no prefix is complete).
func TestTruncated(t *testing.T) {
	data := sampleFile(t)
	if _, err := Parse(data); err != nil {
		t.Fatal(err)
	}
	for n := range len(data) {
		// A fresh copy sized exactly n, so that reading past n is caught by
		// the race detector's and the runtime's bounds checks alike.
		f, err := Parse(bytes.Clone(data[:n]))
		if err == nil {
			t.Fatalf("prefix of %d/%d bytes parsed: %d tensors", n, len(data), len(f.Tensors))
		}
		if !strings.HasPrefix(err.Error(), "gguf: <buffer>: ") {
			t.Fatalf("prefix %d: error %q lacks context", n, err)
		}
	}
}

func TestOpenErrors(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty.gguf")
	must(t, os.WriteFile(empty, nil, 0o644))
	short := filepath.Join(dir, "short.gguf")
	data := sampleFile(t)
	must(t, os.WriteFile(short, data[:len(data)-1], 0o644))
	cases := []struct{ path, want string }{
		{filepath.Join(dir, "absent.gguf"), "no such file"},
		{empty, "gguf: " + empty + ": header: unexpected end of file: 4 bytes needed at offset 0 (size 0)"},
		{short, "gguf: " + short + `: tensor "f32.last": data [`},
		{dir, "gguf: "},
	}
	for _, c := range cases {
		f, err := Open(c.path)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Open(%s) = %v, %v; want error containing %q", c.path, f, err, c.want)
		}
	}
}

// TestWriterHugeAlignment is a regression test from fuzzing: padding to a
// 1 GiB alignment used to allocate a 1 GiB buffer of zeros per file.
func TestWriterHugeAlignment(t *testing.T) {
	w := NewWriter()
	must(t, w.Add("general.alignment", uint32(1<<30)))
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	var buf bytes.Buffer
	n, err := w.WriteTo(&buf)
	runtime.ReadMemStats(&after)
	if err != nil || n != int64(buf.Len()) || buf.Len() != 24+8+17+4+4 {
		t.Fatalf("wrote %d (%d) bytes, %v", n, buf.Len(), err)
	}
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 1<<20 {
		t.Errorf("writing a 53-byte file allocated %d bytes", grew)
	}
	f, err := Parse(buf.Bytes())
	if err != nil || f.Alignment != 1<<30 {
		t.Fatalf("%v, %+v", err, f)
	}
}
