// Package safetensors reads and writes Hugging Face safetensors files: an
// 8-byte little-endian header length, a JSON header mapping tensor names to
// {dtype, shape, data_offsets} (plus an optional "__metadata__" of strings),
// then the tensors' bytes. Files are memory-mapped and tensors are returned
// as views, so opening a multi-gigabyte checkpoint costs nothing until a
// tensor is read. Sharded checkpoints (model.safetensors.index.json) open as
// one Set.
//
// Tensor names here are the file's own (Hugging Face names); package model
// maps them to GGUF names.
package safetensors

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/glint-llm/glint/dtype"
	"github.com/glint-llm/glint/model"
)

// MaxHeaderSize bounds the JSON header, as the reference implementation
// does, so that a hostile length cannot make us allocate or scan gigabytes.
const MaxHeaderSize = 100 << 20

// TensorInfo describes one tensor of a file.
type TensorInfo struct {
	Name  string
	Type  dtype.Type
	Shape []int // row-major, outermost first (as stored)
	// Begin and End are byte offsets into the data section (after the
	// header), as in the file's data_offsets.
	Begin, End int64
}

// File is a parsed safetensors file. Its tensors' Data alias the file's
// memory and are valid until Close.
type File struct {
	Path     string // "" when parsed from memory
	Metadata map[string]string
	Tensors  []TensorInfo // in data order
	index    map[string]int
	data     []byte // the data section
	mapping  []byte // the whole file mapping; nil when parsed from memory
	unmap    func() error
}

// dtypes maps the safetensors dtype names glint can store to its types.
var dtypes = map[string]dtype.Type{"F32": dtype.F32, "F16": dtype.F16, "BF16": dtype.BF16, "I32": dtype.I32}

// dtypeName is the inverse of dtypes, for the writer.
func dtypeName(t dtype.Type) (string, bool) {
	for n, d := range dtypes {
		if d == t {
			return n, true
		}
	}
	return "", false
}

// Parse reads a whole safetensors file held in memory. The returned File
// aliases b. Every field is checked: the header length against the buffer,
// the dtype, the shape's size against its byte range, and the byte ranges
// against each other (they must tile the data section exactly, as the
// reference implementation requires).
func Parse(b []byte) (*File, error) {
	if len(b) < 8 {
		return nil, fmt.Errorf("safetensors: file of %d bytes is shorter than the 8-byte header length", len(b))
	}
	n := binary.LittleEndian.Uint64(b)
	if n > MaxHeaderSize {
		return nil, fmt.Errorf("safetensors: header length %d exceeds the limit of %d bytes", n, MaxHeaderSize)
	}
	if n > uint64(len(b)-8) {
		return nil, fmt.Errorf("safetensors: header length %d runs past the end of the file (%d bytes)", n, len(b))
	}
	hdr := b[8 : 8+n]
	if len(hdr) == 0 || hdr[0] != '{' {
		return nil, errors.New("safetensors: header is not a JSON object")
	}
	f := &File{data: b[8+n:], index: map[string]int{}}
	if err := f.parseHeader(hdr); err != nil {
		return nil, err
	}
	return f, nil
}

// rawTensor is a header entry as stored.
type rawTensor struct {
	DType       string
	Shape       []int64
	DataOffsets []int64
}

// decodeTensor reads a header entry. Field names match exactly, as in the
// reference implementation (encoding/json alone would accept "DType");
// other fields are ignored.
func decodeTensor(dec *json.Decoder) (rawTensor, error) {
	var fields map[string]json.RawMessage
	var raw rawTensor
	if err := dec.Decode(&fields); err != nil {
		return raw, err
	}
	for _, f := range []struct {
		name string
		dst  any
	}{{"dtype", &raw.DType}, {"shape", &raw.Shape}, {"data_offsets", &raw.DataOffsets}} {
		v, ok := fields[f.name]
		if !ok {
			return raw, fmt.Errorf("missing %s", f.name)
		}
		if err := json.Unmarshal(v, f.dst); err != nil {
			return raw, fmt.Errorf("%s: %w", f.name, err)
		}
	}
	return raw, nil
}

func (f *File) parseHeader(hdr []byte) error {
	dec := json.NewDecoder(bytes.NewReader(hdr))
	if _, err := dec.Token(); err != nil { // '{', checked above
		return fmt.Errorf("safetensors: header: %w", err)
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return fmt.Errorf("safetensors: header: %w", err)
		}
		name := tok.(string) // object keys are always strings
		if name == "__metadata__" {
			if f.Metadata != nil {
				return errors.New("safetensors: header: duplicate __metadata__")
			}
			if err := dec.Decode(&f.Metadata); err != nil {
				return fmt.Errorf("safetensors: header: __metadata__ must map strings to strings: %w", err)
			}
			if f.Metadata == nil {
				f.Metadata = map[string]string{}
			}
			continue
		}
		if name == "" {
			return errors.New("safetensors: header: empty tensor name")
		}
		raw, err := decodeTensor(dec)
		if err != nil {
			return fmt.Errorf("safetensors: tensor %q: %w", name, err)
		}
		if _, dup := f.index[name]; dup {
			return fmt.Errorf("safetensors: tensor %q appears twice in the header", name)
		}
		ti, err := f.check(name, raw)
		if err != nil {
			return fmt.Errorf("safetensors: tensor %q: %w", name, err)
		}
		f.index[name] = len(f.Tensors)
		f.Tensors = append(f.Tensors, ti)
	}
	if _, err := dec.Token(); err != nil { // '}'
		return fmt.Errorf("safetensors: header: %w", err)
	}
	// Only padding may follow the object.
	if rest := bytes.TrimRight(hdr[dec.InputOffset():], " \t\r\n\x00"); len(rest) != 0 {
		return fmt.Errorf("safetensors: header: %d unexpected bytes after the JSON object", len(rest))
	}
	slices.SortStableFunc(f.Tensors, func(a, b TensorInfo) int {
		if a.Begin != b.Begin {
			return int(max(-1, min(1, a.Begin-b.Begin)))
		}
		return int(max(-1, min(1, a.End-b.End)))
	})
	var at int64
	for i, t := range f.Tensors {
		if t.Begin != at {
			if t.Begin < at {
				return fmt.Errorf("safetensors: tensor %q: bytes [%d, %d) overlap the previous tensor", t.Name, t.Begin, t.End)
			}
			return fmt.Errorf("safetensors: tensor %q: gap before its bytes [%d, %d) (previous data ends at %d)", t.Name, t.Begin, t.End, at)
		}
		at = t.End
		f.index[t.Name] = i
	}
	if at != int64(len(f.data)) {
		return fmt.Errorf("safetensors: tensors cover %d bytes of a %d-byte data section", at, len(f.data))
	}
	return nil
}

func (f *File) check(name string, raw rawTensor) (TensorInfo, error) {
	dt, ok := dtypes[raw.DType]
	if !ok {
		return TensorInfo{}, fmt.Errorf("unsupported dtype %q", raw.DType)
	}
	if raw.Shape == nil {
		return TensorInfo{}, errors.New("missing shape")
	}
	if len(raw.DataOffsets) != 2 {
		return TensorInfo{}, fmt.Errorf("data_offsets has %d values, want 2", len(raw.DataOffsets))
	}
	shape := make([]int, len(raw.Shape))
	elems := int64(1)
	for i, d := range raw.Shape {
		if d < 0 {
			return TensorInfo{}, fmt.Errorf("negative dimension in shape %v", raw.Shape)
		}
		if d > 0 && elems > math.MaxInt64/d {
			return TensorInfo{}, fmt.Errorf("shape %v overflows", raw.Shape)
		}
		elems *= d
		shape[i] = int(d)
	}
	size := int64(dt.BlockBytes())
	if elems > math.MaxInt64/size {
		return TensorInfo{}, fmt.Errorf("shape %v overflows", raw.Shape)
	}
	size *= elems
	begin, end := raw.DataOffsets[0], raw.DataOffsets[1]
	if begin < 0 || end < begin || end > int64(len(f.data)) {
		return TensorInfo{}, fmt.Errorf("data_offsets [%d, %d] outside the %d-byte data section", begin, end, len(f.data))
	}
	if end-begin != size {
		return TensorInfo{}, fmt.Errorf("data_offsets [%d, %d] hold %d bytes, but %s %v needs %d", begin, end, end-begin, raw.DType, raw.Shape, size)
	}
	return TensorInfo{Name: name, Type: dt, Shape: shape, Begin: begin, End: end}, nil
}

// Info returns the description of the named tensor.
func (f *File) Info(name string) (TensorInfo, bool) {
	i, ok := f.index[name]
	if !ok {
		return TensorInfo{}, false
	}
	return f.Tensors[i], true
}

// Has reports whether the file holds the named tensor.
func (f *File) Has(name string) bool { _, ok := f.index[name]; return ok }

// Tensor returns the named tensor; its Data aliases the file.
func (f *File) Tensor(name string) (model.TensorData, error) {
	t, ok := f.Info(name)
	if !ok {
		return model.TensorData{}, fmt.Errorf("safetensors: %s: no tensor %q", f.where(), name)
	}
	return model.TensorData{Name: name, Type: t.Type, Shape: slices.Clone(t.Shape), Data: f.data[t.Begin:t.End:t.End]}, nil
}

// Names lists the tensors in data order.
func (f *File) Names() []string {
	names := make([]string, len(f.Tensors))
	for i, t := range f.Tensors {
		names[i] = t.Name
	}
	return names
}

// Close unmaps the file; tensors obtained from it become invalid.
func (f *File) Close() error {
	if f.unmap == nil {
		return nil
	}
	err := f.unmap()
	f.unmap, f.data = nil, nil
	return err
}

func (f *File) where() string {
	if f.Path == "" {
		return "(memory)"
	}
	return f.Path
}

// validName rejects shard file names that could escape the checkpoint's
// folder.
func validName(s string) bool {
	return s != "" && s != "." && s != ".." && !strings.ContainsAny(s, `/\`+"\x00")
}
