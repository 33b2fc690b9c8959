package safetensors

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/glint-llm/glint/dtype"
)

// Writer builds a safetensors file. Tensors are laid out in the order they
// are added; their bytes may be supplied up front (Add) or produced while the
// file is written (AddFunc), so that a large checkpoint never has to be held
// in memory.
type Writer struct {
	meta    map[string]string
	tensors []wtensor
	names   map[string]bool
}

type wtensor struct {
	name  string
	dt    dtype.Type
	shape []int
	size  int64
	write func(io.Writer) error
}

// NewWriter returns an empty writer.
func NewWriter() *Writer { return &Writer{meta: map[string]string{}, names: map[string]bool{}} }

// SetMetadata sets a "__metadata__" entry.
func (w *Writer) SetMetadata(key, value string) { w.meta[key] = value }

// Add appends a tensor whose bytes (in dt's layout, row-major) are data.
func (w *Writer) Add(name string, dt dtype.Type, shape []int, data []byte) error {
	return w.AddFunc(name, dt, shape, func(out io.Writer) error {
		_, err := out.Write(data)
		return err
	})
}

// AddFunc appends a tensor whose bytes write produces when the file is
// written; it must write exactly the tensor's size.
func (w *Writer) AddFunc(name string, dt dtype.Type, shape []int, write func(io.Writer) error) error {
	if _, ok := dtypeName(dt); !ok {
		return fmt.Errorf("safetensors: tensor %q: type %v cannot be stored in safetensors", name, dt)
	}
	if name == "" || name == "__metadata__" {
		return fmt.Errorf("safetensors: invalid tensor name %q", name)
	}
	if w.names[name] {
		return fmt.Errorf("safetensors: tensor %q added twice", name)
	}
	size, err := dt.Bytes(shape...)
	if err != nil {
		return fmt.Errorf("safetensors: tensor %q: %w", name, err)
	}
	w.names[name] = true
	w.tensors = append(w.tensors, wtensor{name, dt, slices.Clone(shape), int64(size), write})
	return nil
}

// header renders the JSON header, padded with spaces to a multiple of 8 so
// that the data section is aligned.
func (w *Writer) header() ([]byte, error) {
	var b strings.Builder
	b.WriteByte('{')
	if len(w.meta) > 0 {
		m, err := json.Marshal(w.meta)
		if err != nil {
			return nil, err
		}
		b.WriteString(`"__metadata__":`)
		b.Write(m)
	}
	var off int64
	for i, t := range w.tensors {
		if i > 0 || len(w.meta) > 0 {
			b.WriteByte(',')
		}
		name, _ := json.Marshal(t.name)
		dn, _ := dtypeName(t.dt)
		b.Write(name)
		b.WriteString(`:{"dtype":"` + dn + `","shape":[`)
		for j, d := range t.shape {
			if j > 0 {
				b.WriteByte(',')
			}
			b.WriteString(strconv.Itoa(d))
		}
		fmt.Fprintf(&b, `],"data_offsets":[%d,%d]}`, off, off+t.size)
		off += t.size
	}
	b.WriteByte('}')
	for b.Len()%8 != 0 {
		b.WriteByte(' ')
	}
	return []byte(b.String()), nil
}

// WriteTo writes the file to out.
func (w *Writer) WriteTo(out io.Writer) (int64, error) {
	hdr, err := w.header()
	if err != nil {
		return 0, fmt.Errorf("safetensors: header: %w", err)
	}
	cw := &countWriter{w: out}
	var n [8]byte
	binary.LittleEndian.PutUint64(n[:], uint64(len(hdr)))
	cw.Write(n[:])
	cw.Write(hdr)
	for _, t := range w.tensors {
		start := cw.n
		if err := t.write(cw); err != nil {
			return cw.n, fmt.Errorf("safetensors: tensor %q: %w", t.name, err)
		}
		if cw.err != nil {
			return cw.n, fmt.Errorf("safetensors: tensor %q: %w", t.name, cw.err)
		}
		if got := cw.n - start; got != t.size {
			return cw.n, fmt.Errorf("safetensors: tensor %q: wrote %d bytes, want %d", t.name, got, t.size)
		}
	}
	return cw.n, cw.err
}

// WriteFile writes the file to path; a failed write leaves no file behind.
func (w *Writer) WriteFile(path string) (err error) {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("safetensors: %w", err)
	}
	defer func() {
		if cerr := f.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("safetensors: %w", cerr)
		}
		if err != nil {
			os.Remove(path)
		}
	}()
	bw := bufio.NewWriterSize(f, 1<<20)
	if _, err := w.WriteTo(bw); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("safetensors: %s: %w", path, err)
	}
	return nil
}

// countWriter counts bytes and keeps the first error, so tensor writers may
// ignore write errors and the size check still sees what was written.
type countWriter struct {
	w   io.Writer
	n   int64
	err error
}

func (c *countWriter) Write(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	n, err := c.w.Write(p)
	c.n += int64(n)
	if err != nil {
		c.err = err
	}
	return n, err
}
