package gguf

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/glint-llm/glint/dtype"
)

// Writer builds a GGUF version 3 file: metadata in the order added, then
// tensor infos and data in the order added, each tensor's data padded to the
// alignment, as llama.cpp writes them.
type Writer struct {
	alignment int
	kv        []KV
	keys      map[string]bool
	tensors   []pendingTensor
	names     map[string]bool
}

type pendingTensor struct {
	info  TensorInfo
	data  []byte
	write func(io.Writer) error
}

// NewWriter returns an empty writer (alignment 32 until general.alignment is
// added).
func NewWriter() *Writer {
	return &Writer{alignment: DefaultAlignment, keys: map[string]bool{}, names: map[string]bool{}}
}

// Add appends a metadata pair; see NewValue for the Go types accepted. A
// Value read from another file is copied with its exact type.
func (w *Writer) Add(key string, x any) error {
	if w.keys[key] {
		return fmt.Errorf("gguf: writer: key %q: duplicate", key)
	}
	v, err := NewValue(x)
	if err != nil {
		return fmt.Errorf("gguf: writer: key %q: %w", key, err)
	}
	if key == "general.alignment" {
		a, ok := v.Uint()
		if v.Type != TypeUint32 || !ok || a == 0 || a&(a-1) != 0 || a > 1<<30 {
			return fmt.Errorf("gguf: writer: key %q: %s %v, want a UINT32 power of two", key, v.describe(), v)
		}
		w.alignment = int(a)
	}
	w.keys[key] = true
	w.kv = append(w.kv, KV{Key: key, Value: v})
	return nil
}

// AddTensor appends a tensor of row-major shape whose bytes, in dt's layout,
// are data. data is referenced, not copied, until the file is written.
func (w *Writer) AddTensor(name string, dt dtype.Type, shape []int, data []byte) error {
	ti, err := w.tensorInfo(name, dt, shape)
	if err != nil {
		return err
	}
	if int64(len(data)) != ti.Size {
		return fmt.Errorf("gguf: writer: tensor %q: %d bytes of data, want %d for %v %v", name, len(data), ti.Size, dt, shape)
	}
	w.add(pendingTensor{info: ti, data: data})
	return nil
}

// AddTensorFunc appends a tensor whose bytes write produces when the file is
// written, so that a large model is never held in memory. write must write
// exactly the tensor's size in bytes.
func (w *Writer) AddTensorFunc(name string, dt dtype.Type, shape []int, write func(io.Writer) error) error {
	ti, err := w.tensorInfo(name, dt, shape)
	if err != nil {
		return err
	}
	if write == nil {
		return fmt.Errorf("gguf: writer: tensor %q: nil write function", name)
	}
	w.add(pendingTensor{info: ti, write: write})
	return nil
}

func (w *Writer) add(t pendingTensor) {
	w.names[t.info.Name] = true
	w.tensors = append(w.tensors, t)
}

func (w *Writer) tensorInfo(name string, dt dtype.Type, shape []int) (TensorInfo, error) {
	if w.names[name] {
		return TensorInfo{}, fmt.Errorf("gguf: writer: tensor %q: duplicate name", name)
	}
	if !dt.Known() {
		return TensorInfo{}, fmt.Errorf("gguf: writer: tensor %q: %w", name, UnsupportedTypeError(dt))
	}
	if len(shape) > maxDims {
		return TensorInfo{}, fmt.Errorf("gguf: writer: tensor %q: shape %v has more than %d dimensions", name, shape, maxDims)
	}
	ti := TensorInfo{Name: name, Type: dt, Dims: make([]uint64, len(shape))}
	for i, d := range shape {
		if d < 0 {
			return TensorInfo{}, fmt.Errorf("gguf: writer: tensor %q: negative dimension in shape %v", name, shape)
		}
		ti.Dims[len(shape)-1-i] = uint64(d)
	}
	size, err := dt.Bytes(shape...)
	if err != nil {
		return TensorInfo{}, fmt.Errorf("gguf: writer: tensor %q: %w", name, err)
	}
	ti.Size = int64(size)
	return ti, nil
}

// WriteTo writes the file to out.
func (w *Writer) WriteTo(out io.Writer) (int64, error) {
	align := int64(w.alignment)
	pad := func(n int64) int64 { return (n + align - 1) / align * align }

	hdr := []byte("GGUF")
	hdr = binary.LittleEndian.AppendUint32(hdr, 3)
	hdr = binary.LittleEndian.AppendUint64(hdr, uint64(len(w.tensors)))
	hdr = binary.LittleEndian.AppendUint64(hdr, uint64(len(w.kv)))
	for _, kv := range w.kv {
		hdr = appendString(hdr, kv.Key)
		hdr = binary.LittleEndian.AppendUint32(hdr, uint32(kv.Value.Type))
		hdr = kv.Value.appendBody(hdr)
	}
	var off int64
	for i := range w.tensors {
		ti := &w.tensors[i].info
		ti.Offset = uint64(off)
		off = pad(off + ti.Size)
		hdr = appendString(hdr, ti.Name)
		hdr = binary.LittleEndian.AppendUint32(hdr, uint32(len(ti.Dims)))
		for _, d := range ti.Dims {
			hdr = binary.LittleEndian.AppendUint64(hdr, d)
		}
		hdr = binary.LittleEndian.AppendUint32(hdr, uint32(ti.Type))
		hdr = binary.LittleEndian.AppendUint64(hdr, ti.Offset)
	}
	cw := &countWriter{w: out}
	if _, err := cw.Write(hdr); err != nil {
		return cw.n, fmt.Errorf("gguf: writer: header: %w", err)
	}
	// A file without tensors ends unpadded, as llama.cpp's vocab files do.
	if len(w.tensors) > 0 {
		if err := writeZeros(cw, pad(cw.n)-cw.n); err != nil {
			return cw.n, fmt.Errorf("gguf: writer: header padding: %w", err)
		}
	}
	for _, t := range w.tensors {
		start := cw.n
		if t.write != nil {
			if err := t.write(cw); err != nil {
				return cw.n, fmt.Errorf("gguf: writer: tensor %q: %w", t.info.Name, err)
			}
		} else if _, err := cw.Write(t.data); err != nil {
			return cw.n, fmt.Errorf("gguf: writer: tensor %q: %w", t.info.Name, err)
		}
		if got := cw.n - start; got != t.info.Size {
			return cw.n, fmt.Errorf("gguf: writer: tensor %q: wrote %d bytes, want %d for %v %v", t.info.Name, got, t.info.Size, t.info.Type, t.info.Shape())
		}
		if err := writeZeros(cw, pad(cw.n)-cw.n); err != nil {
			return cw.n, fmt.Errorf("gguf: writer: tensor %q: padding: %w", t.info.Name, err)
		}
	}
	return cw.n, nil
}

// WriteFile writes the file to path by way of a temporary file in the same
// folder, so that a failed write never leaves a truncated model behind.
func (w *Writer) WriteFile(path string) (err error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("gguf: writer: %w", err)
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	bw := bufio.NewWriterSize(tmp, 1<<20)
	if _, err := w.WriteTo(bw); err != nil {
		return fmt.Errorf("%w (writing %s)", err, path)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("gguf: writer: %s: %w", path, err)
	}
	if err := tmp.Chmod(0o644); err != nil {
		return fmt.Errorf("gguf: writer: %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("gguf: writer: %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("gguf: writer: %w", err)
	}
	return nil
}

func appendString(b []byte, s string) []byte {
	b = binary.LittleEndian.AppendUint64(b, uint64(len(s)))
	return append(b, s...)
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// writeZeros writes n zero bytes from a small buffer: the alignment may be
// as large as 1 GiB, and padding must not cost that much memory.
func writeZeros(w io.Writer, n int64) error {
	var zeros [4096]byte
	for n > 0 {
		k := min(n, int64(len(zeros)))
		if _, err := w.Write(zeros[:k]); err != nil {
			return err
		}
		n -= k
	}
	return nil
}
