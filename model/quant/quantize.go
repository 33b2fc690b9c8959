package quant

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/glint-llm/glint/dtype"
	"github.com/glint-llm/glint/model"
	"github.com/glint-llm/glint/model/gguf"
	"github.com/glint-llm/glint/model/load"
)

// Options tune Quantize.
type Options struct {
	// AllowRequantize lets quantised input tensors be dequantised and
	// quantised again (llama-quantize's --allow-requantize); without it they
	// are an error, because the result is worse than quantising the original.
	AllowRequantize bool
	// Vocab, for a Hugging Face folder, is a GGUF file whose tokenizer.*
	// metadata is copied into the output (glint cannot yet convert
	// tokenizer.json to GGUF metadata).
	Vocab string
	// Threads quantise rows in parallel (default: GOMAXPROCS).
	Threads int
	// Progress, if set, is called with bytes written so far and the total.
	Progress func(done, total int64)
}

// GGUF quantisation version (ggml's GGML_QNT_VERSION).
const qntVersion = 2

// Quantize writes the model at in (a GGUF file or a Hugging Face folder) to
// the GGUF file out as target ft, as llama-quantize would: the same tensor
// order, types and bytes, the metadata copied with general.file_type and
// general.quantization_version set. A Hugging Face folder is first seen as
// convert_hf_to_gguf.py would write it (Q/K rows permuted to GGUF order,
// llama.* metadata from config.json), with no tokenizer unless opt.Vocab
// names one.
func Quantize(in, out string, ft FileType, opt Options) error {
	f, err := load.Open(in)
	if err != nil {
		return err
	}
	defer f.Close()
	w := gguf.NewWriter()
	var kvs []gguf.KV
	if f.GGUF != nil {
		kvs = f.GGUF.KV
	} else if kvs, err = hfMetadata(f, opt.Vocab); err != nil {
		return err
	}
	for _, kv := range kvs {
		switch kv.Key {
		case "general.quantization_version", "general.file_type", "split.no", "split.count", "split.tensors.count":
			continue
		}
		if err := w.Add(kv.Key, kv.Value); err != nil {
			return fmt.Errorf("quant: %w", err)
		}
	}
	if err := w.Add("general.quantization_version", uint32(qntVersion)); err != nil {
		return fmt.Errorf("quant: %w", err)
	}
	if err := w.Add("general.file_type", ft.ID); err != nil {
		return fmt.Errorf("quant: %w", err)
	}

	ts, err := tensorsOf(f)
	if err != nil {
		return err
	}
	Order(ts)
	m := Model{Arch: f.Config.Arch, NLayer: f.Config.NLayer, NHead: f.Config.NHead, NHeadKV: f.Config.NHeadKV}
	if f.GGUF != nil {
		if n, err := f.GGUF.Uint(f.Config.Arch + ".expert_count"); err == nil {
			m.NExpert = int(n)
		}
	}
	types, err := Types(ft, m, ts)
	if err != nil {
		return err
	}
	var total int64
	for _, t := range ts {
		n, err := types[t.Name].Bytes(shapeOf(t.Dims)...)
		if err != nil {
			return fmt.Errorf("quant: tensor %q: %w", t.Name, err)
		}
		total += int64(n)
	}
	var done atomic.Int64
	progress := func(n int64) {
		d := done.Add(n)
		if opt.Progress != nil {
			opt.Progress(d, total)
		}
	}
	threads := opt.Threads
	if threads <= 0 {
		threads = runtime.GOMAXPROCS(0)
	}
	for _, t := range ts {
		nt := types[t.Name]
		if t.Type.Quantized() && nt != t.Type && !opt.AllowRequantize {
			return fmt.Errorf("quant: tensor %q is already %v; requantizing it to %v loses accuracy (allow it with --allow-requantize)", t.Name, t.Type, nt)
		}
		write := tensorWriter(f, t, nt, threads, progress)
		if pr, ok := f.Source.(model.PageReleaser); ok {
			// Each input tensor is read once: dropping its pages after use
			// keeps a large model's resident memory to about one tensor.
			inner, name := write, t.Name
			write = func(w io.Writer) error {
				err := inner(w)
				pr.ReleasePages(name)
				return err
			}
		}
		if err := w.AddTensorFunc(t.Name, nt, shapeOf(t.Dims), write); err != nil {
			return fmt.Errorf("quant: %w", err)
		}
	}
	if err := w.WriteFile(out); err != nil {
		return fmt.Errorf("quant: %w", err)
	}
	return nil
}

func shapeOf(dims []int) []int {
	s := make([]int, len(dims))
	for i, d := range dims {
		s[len(s)-1-i] = d
	}
	return s
}

// tensorsOf lists the input's tensors: a GGUF file's as stored, a Hugging
// Face folder's under GGUF names, with the 1-D ones as F32 (what
// convert_hf_to_gguf.py writes them as).
func tensorsOf(f *load.File) ([]Tensor, error) {
	var ts []Tensor
	if f.GGUF != nil {
		for _, ti := range f.GGUF.Tensors {
			dims := make([]int, len(ti.Dims))
			for i, d := range ti.Dims {
				dims[i] = int(d)
			}
			ts = append(ts, Tensor{Name: ti.Name, Dims: dims, Type: ti.Type})
		}
		return ts, nil
	}
	for _, s := range f.Config.TensorShapes() {
		td, err := f.Source.Tensor(s.Name)
		if err != nil {
			return nil, fmt.Errorf("quant: %w", err)
		}
		dims := make([]int, len(td.Shape))
		for i, d := range td.Shape {
			dims[len(dims)-1-i] = d
		}
		typ := td.Type
		if len(dims) == 1 {
			typ = dtype.F32
		}
		ts = append(ts, Tensor{Name: s.Name, Dims: dims, Type: typ})
	}
	return ts, nil
}

// rowsOf gives a tensor's data as the input file holds it, in GGUF row
// order (Q and K of a Hugging Face folder permuted as convert_hf_to_gguf.py
// does).
func rowsOf(f *load.File, t Tensor) (model.TensorData, error) {
	td, err := f.Source.Tensor(t.Name)
	if err != nil {
		return td, fmt.Errorf("quant: %w", err)
	}
	if f.GGUF != nil || len(td.Shape) != 2 {
		return td, nil
	}
	c := f.Config
	heads := 0
	switch {
	case strings.HasSuffix(t.Name, ".attn_q.weight"):
		heads = c.NHead
	case strings.HasSuffix(t.Name, ".attn_k.weight"):
		heads = c.NHeadKV
	}
	// Only llama files store Q and K permuted (convert_hf_to_gguf.py's
	// LlamaModel); every other architecture keeps Hugging Face's rows.
	if heads > 0 && c.Arch == "llama" && c.RopeNeoX {
		if td.Data, err = model.PermuteQK(td.Data, td.Shape[0], heads); err != nil {
			return td, fmt.Errorf("quant: tensor %q: %w", t.Name, err)
		}
	}
	return td, nil
}

// tensorWriter streams one tensor: the bytes as they are when its type
// stays, else each row converted to float32 and quantised, rows spread over
// threads in chunks written in order.
func tensorWriter(f *load.File, t Tensor, nt dtype.Type, threads int, progress func(int64)) func(io.Writer) error {
	return func(w io.Writer) error {
		td, err := rowsOf(f, t)
		if err != nil {
			return err
		}
		if td.Type == nt {
			if _, err := w.Write(td.Data); err != nil {
				return err
			}
			progress(int64(len(td.Data)))
			return nil
		}
		cols := t.Dims[0]
		inRow, err := td.Type.RowBytes(cols)
		if err != nil {
			return fmt.Errorf("quant: tensor %q: %w", t.Name, err)
		}
		outRow, err := nt.RowBytes(cols)
		if err != nil {
			return fmt.Errorf("quant: tensor %q: %w", t.Name, err)
		}
		rows := len(td.Data) / inRow
		// Chunks of about 1 MiB of output keep every thread busy and the
		// buffer small.
		chunk := max(1, min(rows, (1<<20)/max(outRow, 1)))
		buf := make([]byte, chunk*outRow)
		for r0 := 0; r0 < rows; r0 += chunk {
			n := min(chunk, rows-r0)
			var wg sync.WaitGroup
			per := (n + threads - 1) / threads
			for s := 0; s < n; s += per {
				e := min(n, s+per)
				wg.Add(1)
				go func(s, e int) {
					defer wg.Done()
					x := make([]float32, cols)
					for r := s; r < e; r++ {
						src := td.Data[(r0+r)*inRow : (r0+r+1)*inRow]
						toFloat(td.Type, x, src)
						dtype.QuantizeRow(nt, buf[r*outRow:(r+1)*outRow], x)
					}
				}(s, e)
			}
			wg.Wait()
			if _, err := w.Write(buf[:n*outRow]); err != nil {
				return err
			}
			progress(int64(n * outRow))
		}
		return nil
	}
}

// toFloat converts a stored row to float32 (exactly, for F32, F16 and
// BF16, as ggml does).
func toFloat(t dtype.Type, x []float32, src []byte) {
	if t == dtype.F32 {
		for i := range x {
			x[i] = math.Float32frombits(binary.LittleEndian.Uint32(src[4*i:]))
		}
		return
	}
	dtype.DequantizeRow(t, x, src)
}

// hfMetadata is the metadata convert_hf_to_gguf.py writes for a Hugging
// Face folder that glint reads back (architecture and hyper-parameters), plus the
// tokenizer.* pairs of the vocab GGUF, if one is given.
func hfMetadata(f *load.File, vocab string) ([]gguf.KV, error) {
	c := f.Config
	var kvs []gguf.KV
	for _, p := range []struct {
		k string
		v any
	}{{"general.architecture", c.Arch}, {"general.name", filepath.Base(f.Dir)}} {
		v, err := gguf.NewValue(p.v)
		if err != nil {
			return nil, fmt.Errorf("quant: %s: %w", p.k, err)
		}
		kvs = append(kvs, gguf.KV{Key: p.k, Value: v})
	}
	hp, err := gguf.HParams(c)
	if err != nil {
		return nil, fmt.Errorf("quant: %w", err)
	}
	kvs = append(kvs, hp...)
	if vocab == "" {
		return kvs, nil
	}
	vf, err := gguf.Open(vocab)
	if err != nil {
		return nil, fmt.Errorf("quant: vocabulary: %w", err)
	}
	defer vf.Close()
	n := 0
	for _, kv := range vf.KV {
		if strings.HasPrefix(kv.Key, "tokenizer.") {
			kvs = append(kvs, kv)
			n++
		}
	}
	if n == 0 {
		return nil, fmt.Errorf("quant: vocabulary %s has no tokenizer metadata", vocab)
	}
	return kvs, nil
}
