package gguf

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"github.com/glint-llm/glint/internal/pages"
	"io"
	"math"
	"math/bits"

	"github.com/glint-llm/glint/dtype"
	"github.com/glint-llm/glint/model"
)

// DefaultAlignment is the data alignment of a file without general.alignment.
const DefaultAlignment = 32

// maxDepth bounds array nesting: real files nest at most once, and a bound
// keeps a hostile file from recursing a million levels deep.
const maxDepth = 8

// maxDims is ggml's GGML_MAX_DIMS.
const maxDims = 4

// Errors wrapped by the typed getters and tensor lookups, for errors.Is.
var (
	ErrMissing = errors.New("missing")
	ErrType    = errors.New("wrong type")
	ErrClosed  = errors.New("file is closed")
)

// TensorInfo describes one tensor as stored.
type TensorInfo struct {
	Name   string
	Dims   []uint64 // ggml order: ne0 (the row length) first
	Type   dtype.Type
	Offset uint64 // from the start of the data section
	Size   int64  // bytes
}

// Shape is the row-major shape (outermost first), the reverse of Dims.
func (ti TensorInfo) Shape() []int {
	s := make([]int, len(ti.Dims))
	for i, d := range ti.Dims {
		s[len(s)-1-i] = int(d)
	}
	return s
}

// File is a parsed GGUF file. Its metadata is held in ordinary memory; its
// tensor data stays in the mapped file (or the buffer given to Parse) and is
// only sliced, never copied.
type File struct {
	Path       string // as given to Open; "" after Parse
	Version    uint32
	Alignment  int
	KV         []KV
	Tensors    []TensorInfo
	DataOffset int64 // where the data section starts
	Size       int64 // of the whole file

	data   []byte
	unmap  func([]byte) error
	keys   map[string]int
	byName map[string]int
}

var (
	_ model.Source       = (*File)(nil)
	_ model.PageReleaser = (*File)(nil)
)

// Open maps the file read-only and parses it. Tensor data slices point into
// the mapping, so they are valid until Close.
func Open(path string) (*File, error) {
	data, unmap, err := mapFile(path)
	if err != nil {
		return nil, fmt.Errorf("gguf: %w", err)
	}
	f, err := parse(path, data)
	if err != nil {
		if unmap != nil {
			_ = unmap(data)
		}
		return nil, err
	}
	f.unmap = unmap
	return f, nil
}

// Parse parses a GGUF file held in memory. Tensor data slices alias data.
func Parse(data []byte) (*File, error) {
	return parse("", data)
}

// Close unmaps the file; tensor data obtained earlier must not be used
// afterwards. Metadata values stay valid.
func (f *File) Close() error {
	if f.data == nil {
		return nil
	}
	data := f.data
	f.data = nil
	if f.unmap != nil {
		if err := f.unmap(data); err != nil {
			return f.errorf("unmap: %w", err)
		}
	}
	return nil
}

func (f *File) errorf(format string, args ...any) error {
	name := f.Path
	if name == "" {
		name = "<buffer>"
	}
	return fmt.Errorf("gguf: %s: "+format, append([]any{name}, args...)...)
}

// keyError keeps the %w chain of the getters' errors intact.
func (f *File) keyError(key string, err error) error {
	name := f.Path
	if name == "" {
		name = "<buffer>"
	}
	return fmt.Errorf("gguf: %s: key %q: %w", name, key, err)
}

func parse(name string, data []byte) (*File, error) {
	f := &File{Path: name, Size: int64(len(data)), data: data, Alignment: DefaultAlignment}
	r := &reader{buf: data}

	magic, err := r.take(4)
	if err != nil {
		return nil, f.errorf("header: %w", err)
	}
	if string(magic) != "GGUF" {
		return nil, f.errorf("not a GGUF file: magic %q, want \"GGUF\"", magic)
	}
	if f.Version, err = r.u32(); err != nil {
		return nil, f.errorf("header: %w", err)
	}
	switch v := f.Version; {
	case v == 2 || v == 3:
	case v == 1:
		return nil, f.errorf("GGUF version 1 is not supported (only 2 and 3)")
	case bits.ReverseBytes32(v) >= 1 && bits.ReverseBytes32(v) <= 3:
		return nil, f.errorf("big-endian GGUF (version %d) is not supported", bits.ReverseBytes32(v))
	default:
		return nil, f.errorf("unsupported GGUF version %d (only 2 and 3)", v)
	}
	nTensors, err := r.u64()
	if err != nil {
		return nil, f.errorf("header: %w", err)
	}
	nKV, err := r.u64()
	if err != nil {
		return nil, f.errorf("header: %w", err)
	}
	// Smallest encodings: a KV pair is a key length, a type and one byte; a
	// tensor info is a name length, n_dims, a type and an offset. Both
	// counts are checked before either is read, so neither sizes a table.
	const minKV, minTensor = 8 + 4 + 1, 8 + 4 + 4 + 8
	left := uint64(r.left())
	if nTensors > left/minTensor {
		return nil, f.errorf("header: tensor count %d exceeds what the %d bytes left can hold (%d bytes each at least): %w", nTensors, left, minTensor, io.ErrUnexpectedEOF)
	}
	if nKV > (left-nTensors*minTensor)/minKV {
		return nil, f.errorf("header: metadata pair count %d exceeds what the %d bytes left can hold beside %d tensors (%d bytes each at least): %w", nKV, left, nTensors, minKV, io.ErrUnexpectedEOF)
	}

	f.KV = make([]KV, 0, min(nKV, 1024))
	f.keys = make(map[string]int, min(nKV, 1024))
	for i := range nKV {
		at := r.off
		key, err := r.str()
		if err != nil {
			return nil, f.errorf("metadata pair %d: key: %w", i, err)
		}
		if _, dup := f.keys[key]; dup {
			return nil, f.errorf("key %q: duplicate (pair %d at offset %d)", key, i, at)
		}
		t, err := r.u32()
		if err != nil {
			return nil, f.errorf("key %q: type: %w", key, err)
		}
		v, err := r.value(ValueType(t))
		if err != nil {
			return nil, f.errorf("key %q: %w", key, err)
		}
		// Values must not alias the mapping, which Close unmaps.
		v.raw = bytes.Clone(v.raw)
		f.keys[key] = len(f.KV)
		f.KV = append(f.KV, KV{Key: key, Value: v})
	}

	if v, ok := f.Get("general.alignment"); ok {
		a, ok := v.Uint()
		switch {
		case !ok:
			return nil, f.errorf("key \"general.alignment\": %s %v is not an unsigned integer", v.describe(), brief(v))
		case a == 0 || a&(a-1) != 0:
			return nil, f.errorf("key \"general.alignment\": %d is not a power of two", a)
		case a > 1<<30:
			return nil, f.errorf("key \"general.alignment\": %d is too large", a)
		}
		f.Alignment = int(a)
	}

	f.Tensors = make([]TensorInfo, 0, min(nTensors, 1024))
	f.byName = make(map[string]int, min(nTensors, 1024))
	for i := range nTensors {
		ti, err := r.tensorInfo()
		if err != nil {
			if ti.Name == "" {
				return nil, f.errorf("tensor %d: %w", i, err)
			}
			return nil, f.errorf("tensor %q: %w", ti.Name, err)
		}
		if _, dup := f.byName[ti.Name]; dup {
			return nil, f.errorf("tensor %q: duplicate name", ti.Name)
		}
		f.byName[ti.Name] = len(f.Tensors)
		f.Tensors = append(f.Tensors, ti)
	}

	align := int64(f.Alignment)
	f.DataOffset = (int64(r.off) + align - 1) / align * align
	size := uint64(len(data))
	for _, ti := range f.Tensors {
		if ti.Offset%uint64(align) != 0 {
			return nil, f.errorf("tensor %q: offset %d is not a multiple of the alignment %d", ti.Name, ti.Offset, align)
		}
		start := satAdd(uint64(f.DataOffset), ti.Offset)
		end := satAdd(start, uint64(ti.Size))
		if end > size {
			return nil, f.errorf("tensor %q: data [%d, %d) past end of file (size %d)", ti.Name, start, end, size)
		}
	}
	return f, nil
}

func satAdd(a, b uint64) uint64 {
	if s := a + b; s >= a {
		return s
	}
	return math.MaxUint64
}

// Get returns the value of a metadata key.
func (f *File) Get(key string) (Value, bool) {
	i, ok := f.keys[key]
	if !ok {
		return Value{}, false
	}
	return f.KV[i].Value, true
}

// get returns a key's value, or an error wrapping ErrMissing.
func (f *File) get(key string) (Value, error) {
	v, ok := f.Get(key)
	if !ok {
		return v, f.keyError(key, ErrMissing)
	}
	return v, nil
}

func (f *File) typeError(key string, v Value, want string) error {
	if v.Type == TypeArray {
		return f.keyError(key, fmt.Errorf("%w: %s of %d, want %s", ErrType, v.describe(), v.n, want))
	}
	return f.keyError(key, fmt.Errorf("%w: %s %s, want %s", ErrType, v.describe(), brief(v), want))
}

// String returns a STRING value.
func (f *File) String(key string) (string, error) {
	v, err := f.get(key)
	if err != nil {
		return "", err
	}
	s, ok := v.Str()
	if !ok {
		return "", f.typeError(key, v, "a string")
	}
	return s, nil
}

// Uint returns a non-negative integer value of any width.
func (f *File) Uint(key string) (uint64, error) {
	v, err := f.get(key)
	if err != nil {
		return 0, err
	}
	x, ok := v.Uint()
	if !ok {
		return 0, f.typeError(key, v, "an unsigned integer")
	}
	return x, nil
}

// Int returns an integer value of any width that fits in an int64.
func (f *File) Int(key string) (int64, error) {
	v, err := f.get(key)
	if err != nil {
		return 0, err
	}
	x, ok := v.Int()
	if !ok {
		return 0, f.typeError(key, v, "an int64")
	}
	return x, nil
}

// Float returns a floating-point (or integer) value.
func (f *File) Float(key string) (float64, error) {
	v, err := f.get(key)
	if err != nil {
		return 0, err
	}
	x, ok := v.Float()
	if !ok {
		return 0, f.typeError(key, v, "a number")
	}
	return x, nil
}

// Bool returns a BOOL value.
func (f *File) Bool(key string) (bool, error) {
	v, err := f.get(key)
	if err != nil {
		return false, err
	}
	x, ok := v.Bool()
	if !ok {
		return false, f.typeError(key, v, "a bool")
	}
	return x, nil
}

// Strings returns an array of STRING.
func (f *File) Strings(key string) ([]string, error) {
	v, err := f.get(key)
	if err != nil {
		return nil, err
	}
	x, ok := v.Strings()
	if !ok {
		return nil, f.typeError(key, v, "an array of strings")
	}
	return x, nil
}

// Float32s returns an array of FLOAT32 (or FLOAT64).
func (f *File) Float32s(key string) ([]float32, error) {
	v, err := f.get(key)
	if err != nil {
		return nil, err
	}
	x, ok := v.Float32s()
	if !ok {
		return nil, f.typeError(key, v, "an array of floats")
	}
	return x, nil
}

// Int32s returns an array of integers that all fit in an int32.
func (f *File) Int32s(key string) ([]int32, error) {
	v, err := f.get(key)
	if err != nil {
		return nil, err
	}
	x, ok := v.Int32s()
	if !ok {
		return nil, f.typeError(key, v, "an array of int32-sized integers")
	}
	return x, nil
}

// Info returns the description of a tensor.
func (f *File) Info(name string) (TensorInfo, bool) {
	i, ok := f.byName[name]
	if !ok {
		return TensorInfo{}, false
	}
	return f.Tensors[i], true
}

// TensorData returns a tensor's bytes, a slice of the mapped file.
func (f *File) TensorData(name string) ([]byte, TensorInfo, error) {
	ti, ok := f.Info(name)
	if !ok {
		return nil, ti, f.errorf("tensor %q: %w", name, ErrMissing)
	}
	if f.data == nil {
		return nil, ti, f.errorf("tensor %q: %w", name, ErrClosed)
	}
	start := f.DataOffset + int64(ti.Offset)
	return f.data[start : start+ti.Size : start+ti.Size], ti, nil
}

// Tensor implements model.Source.
func (f *File) Tensor(name string) (model.TensorData, error) {
	data, ti, err := f.TensorData(name)
	if err != nil {
		return model.TensorData{}, err
	}
	return model.TensorData{Name: name, Type: ti.Type, Shape: ti.Shape(), Data: data}, nil
}

// Has implements model.Source.
func (f *File) Has(name string) bool {
	_, ok := f.byName[name]
	return ok
}

// reader decodes little-endian GGUF fields, checking every length against
// what is left before it slices or allocates.
type reader struct {
	buf []byte
	off int
}

// shortError is a field or payload that runs past the end of the input.
type shortError struct {
	off  int
	want uint64
	size int
}

func (e *shortError) Error() string {
	return fmt.Sprintf("unexpected end of file: %d bytes needed at offset %d (size %d)", e.want, e.off, e.size)
}

func (e *shortError) Unwrap() error { return io.ErrUnexpectedEOF }

func (r *reader) left() int { return len(r.buf) - r.off }

func (r *reader) take(n uint64) ([]byte, error) {
	if n > uint64(r.left()) {
		return nil, &shortError{off: r.off, want: n, size: len(r.buf)}
	}
	b := r.buf[r.off : r.off+int(n)]
	r.off += int(n)
	return b, nil
}

func (r *reader) u32() (uint32, error) {
	b, err := r.take(4)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint32(b), nil
}

func (r *reader) u64() (uint64, error) {
	b, err := r.take(8)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint64(b), nil
}

func (r *reader) str() (string, error) {
	n, err := r.u64()
	if err != nil {
		return "", err
	}
	b, err := r.take(n)
	if err != nil {
		return "", fmt.Errorf("string of %d bytes: %w", n, err)
	}
	return string(b), nil
}

// value reads a value of type t. An array's raw aliases the input.
func (r *reader) value(t ValueType) (Value, error) {
	sz := t.size()
	switch {
	case sz < 0:
		return Value{}, fmt.Errorf("unknown value type %d at offset %d", uint32(t), r.off-4)
	case sz > 0:
		b, err := r.take(uint64(sz))
		if err != nil {
			return Value{}, err
		}
		v := Value{Type: t}
		for i := sz - 1; i >= 0; i-- {
			v.bits = v.bits<<8 | uint64(b[i])
		}
		return v, nil
	case t == TypeString:
		s, err := r.str()
		return Value{Type: TypeString, str: s}, err
	}
	return r.array(1)
}

// array reads an array header and body at nesting level depth (1 for an
// array that is not inside another).
func (r *reader) array(depth int) (Value, error) {
	et, err := r.u32()
	if err != nil {
		return Value{}, fmt.Errorf("array element type: %w", err)
	}
	n, err := r.u64()
	if err != nil {
		return Value{}, fmt.Errorf("array length: %w", err)
	}
	start := r.off
	if err := r.skipArray(ValueType(et), n, depth); err != nil {
		return Value{}, err
	}
	// skipArray proved n elements of at least one byte each fit, so n fits
	// in an int.
	return Value{Type: TypeArray, Elem: ValueType(et), n: int(n), raw: r.buf[start:r.off:r.off]}, nil
}

// skipArray steps over the body of an array of n elements of type et.
func (r *reader) skipArray(et ValueType, n uint64, depth int) error {
	if depth > maxDepth {
		return fmt.Errorf("arrays nested more than %d deep at offset %d", maxDepth, r.off)
	}
	least := uint64(et.size())
	switch {
	case et.size() < 0:
		return fmt.Errorf("array of unknown element type %d at offset %d", uint32(et), r.off)
	case et == TypeString:
		least = 8 // a length
	case et == TypeArray:
		least = 4 + 8 // an element type and a length
	}
	if left := uint64(r.left()); n > left/least {
		return fmt.Errorf("array of %d %v at offset %d cannot fit in the %d bytes left: %w", n, et, r.off, left, io.ErrUnexpectedEOF)
	}
	switch et {
	case TypeString:
		for i := range n {
			l, err := r.u64()
			if err != nil {
				return fmt.Errorf("array element %d: %w", i, err)
			}
			if _, err := r.take(l); err != nil {
				return fmt.Errorf("array element %d: string of %d bytes: %w", i, l, err)
			}
		}
	case TypeArray:
		for i := range n {
			if _, err := r.array(depth + 1); err != nil {
				return fmt.Errorf("array element %d: %w", i, err)
			}
		}
	default:
		r.off += int(n * least)
	}
	return nil
}

func (r *reader) tensorInfo() (TensorInfo, error) {
	var ti TensorInfo
	var err error
	if ti.Name, err = r.str(); err != nil {
		return ti, fmt.Errorf("name: %w", err)
	}
	nd, err := r.u32()
	if err != nil {
		return ti, fmt.Errorf("n_dims: %w", err)
	}
	if nd > maxDims {
		return ti, fmt.Errorf("%d dimensions, at most %d are supported", nd, maxDims)
	}
	ti.Dims = make([]uint64, nd)
	for j := range ti.Dims {
		if ti.Dims[j], err = r.u64(); err != nil {
			return ti, fmt.Errorf("dimension %d: %w", j, err)
		}
		if ti.Dims[j] > math.MaxInt {
			return ti, fmt.Errorf("dimension %d is %d", j, ti.Dims[j])
		}
	}
	t, err := r.u32()
	if err != nil {
		return ti, fmt.Errorf("type: %w", err)
	}
	ti.Type = dtype.Type(t)
	if ti.Offset, err = r.u64(); err != nil {
		return ti, fmt.Errorf("offset: %w", err)
	}
	if !ti.Type.Known() {
		return ti, UnsupportedTypeError(ti.Type)
	}
	size, err := ti.Type.Bytes(ti.Shape()...)
	if err != nil {
		return ti, fmt.Errorf("dims %v: %w", ti.Dims, err)
	}
	ti.Size = int64(size)
	return ti, nil
}

// brief formats a value for an error message, cut short: a wrong-typed key
// may hold a whole chat template.
func brief(v Value) string {
	s := v.String()
	if r := []rune(s); len(r) > 40 {
		s = string(r[:40]) + "…"
	}
	return s
}

// ReleasePages drops a tensor's pages of the file mapping from resident
// memory once a backend has its own copy (model.PageReleaser). The data
// stays valid: it is read back from the file if touched. A no-op for files
// parsed from memory.
func (f *File) ReleasePages(name string) {
	if f.unmap == nil {
		return
	}
	if data, _, err := f.TensorData(name); err == nil {
		pages.Release(f.data, data)
	}
}

// UnsupportedTypeError is the error for a tensor type dtype has no layout
// for: it names the type as ggml does, with its id, and lists the types
// that are supported.
func UnsupportedTypeError(t dtype.Type) error {
	name := fmt.Sprintf("%v (%d)", t, uint32(t))
	if t.String() == fmt.Sprintf("ggml_type(%d)", uint32(t)) {
		name = fmt.Sprintf("%d, which ggml does not define,", uint32(t))
	}
	return fmt.Errorf("type %s is not supported (supported: %s)", name, dtype.KnownNames())
}
