// Package onnx runs decoder-only ONNX language models with a KV cache
// through ONNX Runtime (github.com/yalue/onnxruntime_go). It is glint's
// independent reference engine: the same engine.Model interface as the
// native layers, computed by different code, so the two can be compared.
//
// The runner is generic. It reads the graph's inputs and outputs from the
// session and binds them by name: input_ids (int32 or int64), an optional
// attention_mask and position_ids, and per-layer caches in either the
// Optimum/GenAI form (past_key_values.N.key/value → present.N.key/value,
// [batch, kv_heads, seq, head_dim]) or the older stacked form (past_N →
// present_N, [2, batch, heads, seq, head_dim]), float32 or float16. Layer
// counts and shapes come from the model, never from this code.
//
// The shared library is found through Options.Lib, the ONNXRUNTIME_LIB
// environment variable, or third_party/onnxruntime/libonnxruntime.so.1 that
// `make onnxruntime` (scripts/onnxruntime.sh) installs.
package onnx

import (
	"errors"
	"fmt"
	"math"
	"strings"

	ort "github.com/yalue/onnxruntime_go"

	"github.com/glint-llm/glint/dtype"
	"github.com/glint-llm/glint/engine"
)

// Options configure Open.
type Options struct {
	// Lib is the path of libonnxruntime.so; empty means $ONNXRUNTIME_LIB,
	// then third_party/onnxruntime/libonnxruntime.so.1 above the working
	// directory or the executable.
	Lib string
	// Threads is ONNX Runtime's intra-op thread count; 0 lets it choose.
	Threads int
}

// Info describes an opened model.
type Info struct {
	File      string // the decoder .onnx
	Config    string // the config file that described it ("" if none)
	Runtime   string // ONNX Runtime version
	Lib       string // the loaded shared library
	Layers    int
	KVHeads   int
	HeadDim   int
	KVType    string // "float32" or "float16"
	KVStacked bool   // past_N [2, batch, heads, seq, head_dim] form
	IDType    string // "int32" or "int64"
	Vocab     int
	Context   int
	BOS, Pad  int32 // -1 when the config does not say
	EOS       []int32
	HasMask   bool
	HasPosIDs bool
}

// Model is a decoder session with its KV cache; it implements engine.Model.
// It is not safe for concurrent use.
type Model struct {
	sess *ort.DynamicAdvancedSession
	info Info

	inputNames  []string
	outputNames []string
	// roles of inputs[i]: one of the role* constants or a kv slot index.
	inputRole []int
	idsT      ort.TensorElementDataType
	maskT     ort.TensorElementDataType
	posT      ort.TensorElementDataType
	logitsT   ort.TensorElementDataType

	slots    []*kvSlot
	kvElem   int // bytes per KV element
	kvType   ort.TensorElementDataType
	logitBuf []byte
	i64      [3][]int64 // ids, mask, positions scratch
	i32      [3][]int32

	// per-step value lists, reused so that a step allocates little on the
	// Go heap (the OrtValues themselves live in C memory).
	inVals, outVals []ort.Value

	pos int
	// outRows are the rows of logitBuf that are the outputs of the last
	// run; row and toks are scratch.
	outRows []int
	row     []float32
	toks    []int32
	closed  bool
}

const (
	roleIDs = -1 - iota
	roleMask
	rolePos
)

// kvSlot is one past input and its present output. The cache lives in two
// Go buffers used in turn: ONNX Runtime reads the past from one and writes
// the present into the other, which becomes the next step's past. Shapes
// grow by a token each step, so the OrtValues are remade per step but the
// memory behind them is not.
type kvSlot struct {
	past, present string
	dims          []int64 // [batch=1, heads, seq, hd] or [2, 1, heads, seq, hd]
	seqAxis       int
	bufs          [2][]byte
	cur           int // bufs[cur] holds the current past
}

var _ engine.Model = (*Model)(nil)

// Open loads the decoder in dir (a folder, or an .onnx file directly) and
// checks that its inputs and outputs form a KV-cache decoder.
func Open(dir string, opts Options) (*Model, error) {
	fc, err := readConfig(dir)
	if err != nil {
		return nil, err
	}
	lib, version, err := initRuntime(opts.Lib)
	if err != nil {
		return nil, err
	}
	so, err := ort.NewSessionOptions()
	if err != nil {
		return nil, fmt.Errorf("onnx: session options: %w", err)
	}
	defer so.Destroy()
	if opts.Threads > 0 {
		if err := so.SetIntraOpNumThreads(opts.Threads); err != nil {
			return nil, fmt.Errorf("onnx: threads %d: %w", opts.Threads, err)
		}
		if err := so.SetInterOpNumThreads(1); err != nil {
			return nil, fmt.Errorf("onnx: inter-op threads: %w", err)
		}
	}
	// The metadata comes from a throwaway session (onnxruntime_go offers no
	// other way); skipping graph optimisation there makes it cheap.
	infoOpts, err := ort.NewSessionOptions()
	if err != nil {
		return nil, fmt.Errorf("onnx: session options: %w", err)
	}
	defer infoOpts.Destroy()
	if err := infoOpts.SetGraphOptimizationLevel(ort.GraphOptimizationLevelDisableAll); err != nil {
		return nil, fmt.Errorf("onnx: session options: %w", err)
	}
	ins, outs, err := ort.GetInputOutputInfoWithOptions(fc.decoder, infoOpts)
	if err != nil {
		return nil, fmt.Errorf("onnx: load %s: %w", fc.decoder, err)
	}
	m := &Model{info: Info{File: fc.decoder, Config: fc.source, Runtime: version, Lib: lib,
		BOS: fc.bos, Pad: fc.pad, EOS: fc.eos, Context: fc.context}}
	if err := m.bind(fc, ins, outs); err != nil {
		return nil, fmt.Errorf("onnx: %s: %w", fc.decoder, err)
	}
	m.sess, err = ort.NewDynamicAdvancedSession(fc.decoder, m.inputNames, m.outputNames, so)
	if err != nil {
		return nil, fmt.Errorf("onnx: load %s: %w", fc.decoder, err)
	}
	m.inVals = make([]ort.Value, len(m.inputNames))
	m.outVals = make([]ort.Value, len(m.outputNames))
	return m, nil
}

func elemName(t ort.TensorElementDataType) string {
	switch t {
	case ort.TensorElementDataTypeFloat:
		return "float32"
	case ort.TensorElementDataTypeFloat16:
		return "float16"
	case ort.TensorElementDataTypeInt32:
		return "int32"
	case ort.TensorElementDataTypeInt64:
		return "int64"
	}
	return strings.TrimPrefix(t.String(), "ONNX_TENSOR_ELEMENT_DATA_TYPE_")
}

func describe(io []ort.InputOutputInfo) string {
	var s []string
	for _, v := range io {
		s = append(s, fmt.Sprintf("%s %s%v", v.Name, elemName(v.DataType), []int64(v.Dimensions)))
	}
	return strings.Join(s, ", ")
}

// bind maps the graph's inputs and outputs to roles and KV slots and checks
// their types and shapes against each other and the configuration.
func (m *Model) bind(fc *fileConfig, ins, outs []ort.InputOutputInfo) error {
	n := fc.names
	outByName := map[string]ort.InputOutputInfo{}
	for _, o := range outs {
		outByName[o.Name] = o
	}
	intType := func(v ort.InputOutputInfo) error {
		if v.OrtValueType != ort.ONNXTypeTensor ||
			(v.DataType != ort.TensorElementDataTypeInt32 && v.DataType != ort.TensorElementDataTypeInt64) {
			return fmt.Errorf("input %q is %s, want an int32 or int64 tensor", v.Name, elemName(v.DataType))
		}
		return nil
	}
	type kvIn struct {
		info    ort.InputOutputInfo
		layer   int
		kind    string // "key", "value" or "" (stacked)
		present string
	}
	var kvs []kvIn
	seenIDs := false
	for _, in := range ins {
		switch in.Name {
		case n.ids:
			if err := intType(in); err != nil {
				return err
			}
			if len(in.Dimensions) != 2 {
				return fmt.Errorf("input %q has shape %v, want [batch, seq]", in.Name, in.Dimensions)
			}
			seenIDs = true
			m.idsT = in.DataType
			m.info.IDType = elemName(in.DataType)
			m.inputRole = append(m.inputRole, roleIDs)
		case n.mask:
			if err := intType(in); err != nil {
				return err
			}
			m.maskT = in.DataType
			m.info.HasMask = true
			m.inputRole = append(m.inputRole, roleMask)
		case n.pos:
			if err := intType(in); err != nil {
				return err
			}
			m.posT = in.DataType
			m.info.HasPosIDs = true
			m.inputRole = append(m.inputRole, rolePos)
		default:
			k := kvIn{info: in, layer: -1}
			switch {
			case layerOf(n.pastKey, in.Name) >= 0:
				k.layer, k.kind = layerOf(n.pastKey, in.Name), "key"
				k.present = presentName(n.presentKey, k.layer)
			case layerOf(n.pastValue, in.Name) >= 0:
				k.layer, k.kind = layerOf(n.pastValue, in.Name), "value"
				k.present = presentName(n.presentVal, k.layer)
			case layerOf(n.pastStacked, in.Name) >= 0:
				k.layer = layerOf(n.pastStacked, in.Name)
				k.present = presentName(n.presentStacked, k.layer)
			default:
				return fmt.Errorf("input %q (%s) is neither %s, %s, %s nor a KV cache (%s or %s); inputs: %s",
					in.Name, elemName(in.DataType), n.ids, n.mask, n.pos, n.pastKeyFmt, n.pastStackedFmt, describe(ins))
			}
			kvs = append(kvs, k)
			m.inputRole = append(m.inputRole, len(kvs)-1)
		}
		m.inputNames = append(m.inputNames, in.Name)
	}
	if !seenIDs {
		return fmt.Errorf("no %q input (inputs: %s)", n.ids, describe(ins))
	}
	if len(kvs) == 0 {
		return fmt.Errorf("no KV-cache inputs (%s or %s): not a decoder with past (inputs: %s)", n.pastKeyFmt, n.pastStackedFmt, describe(ins))
	}

	logits, ok := outByName[n.logits]
	if !ok {
		return fmt.Errorf("no %q output (outputs: %s)", n.logits, describe(outs))
	}
	if logits.DataType != ort.TensorElementDataTypeFloat && logits.DataType != ort.TensorElementDataTypeFloat16 {
		return fmt.Errorf("output %q is %s, want float32 or float16", n.logits, elemName(logits.DataType))
	}
	if len(logits.Dimensions) != 3 {
		return fmt.Errorf("output %q has shape %v, want [batch, seq, vocab]", n.logits, logits.Dimensions)
	}
	m.logitsT = logits.DataType
	m.info.Vocab = int(logits.Dimensions[2])
	switch {
	case m.info.Vocab <= 0 && fc.vocab > 0:
		m.info.Vocab = fc.vocab
	case m.info.Vocab <= 0:
		return fmt.Errorf("output %q has a dynamic vocab dimension and no config gives vocab_size", n.logits)
	case fc.vocab > 0 && fc.vocab != m.info.Vocab:
		// The graph is authoritative; configs often round vocab_size up.
	}
	m.outputNames = append(m.outputNames, n.logits)

	// Every layer 0..L-1 needs its caches; each past needs its present with
	// the same element type, head count and head size.
	layers := 0
	stacked := 0
	seen := map[string]bool{}
	for _, k := range kvs {
		layers = max(layers, k.layer+1)
		if k.kind == "" {
			stacked++
		}
		seen[fmt.Sprintf("%d.%s", k.layer, k.kind)] = true
	}
	if stacked != 0 && stacked != len(kvs) {
		return fmt.Errorf("model mixes stacked (%s) and split (%s) KV inputs", n.pastStackedFmt, n.pastKeyFmt)
	}
	m.info.KVStacked = stacked != 0
	for l := 0; l < layers; l++ {
		kinds := []string{"key", "value"}
		if m.info.KVStacked {
			kinds = []string{""}
		}
		for _, kind := range kinds {
			if !seen[fmt.Sprintf("%d.%s", l, kind)] {
				return fmt.Errorf("layer %d has no past %s input (layers must be numbered 0..%d)", l, or(kind, "cache"), layers-1)
			}
		}
	}
	m.info.Layers = layers

	var kvType ort.TensorElementDataType
	for i, k := range kvs {
		in := k.info
		if in.DataType != ort.TensorElementDataTypeFloat && in.DataType != ort.TensorElementDataTypeFloat16 {
			return fmt.Errorf("KV input %q is %s, want float32 or float16", in.Name, elemName(in.DataType))
		}
		if i == 0 {
			kvType = in.DataType
		} else if in.DataType != kvType {
			return fmt.Errorf("KV input %q is %s but %q is %s", in.Name, elemName(in.DataType), kvs[0].info.Name, elemName(kvType))
		}
		out, ok := outByName[k.present]
		if !ok {
			return fmt.Errorf("KV input %q has no matching output %q (outputs: %s)", in.Name, k.present, describe(outs))
		}
		if out.DataType != in.DataType {
			return fmt.Errorf("KV output %q is %s but its past %q is %s", out.Name, elemName(out.DataType), in.Name, elemName(in.DataType))
		}
		rank, seqAxis, headAxis := 4, 2, 1
		if m.info.KVStacked {
			rank, seqAxis, headAxis = 5, 3, 2
		}
		if len(in.Dimensions) != rank || len(out.Dimensions) != rank {
			return fmt.Errorf("KV %q %v / %q %v: want rank %d", in.Name, in.Dimensions, out.Name, out.Dimensions, rank)
		}
		if m.info.KVStacked && (in.Dimensions[0] > 0 && in.Dimensions[0] != 2 || out.Dimensions[0] > 0 && out.Dimensions[0] != 2) {
			return fmt.Errorf("stacked KV %q %v / %q %v: first dimension must be 2 (key, value)", in.Name, in.Dimensions, out.Name, out.Dimensions)
		}
		dims := make([]int64, rank)
		if m.info.KVStacked {
			dims[0] = 2
		}
		dims[seqAxis-2] = 1 // batch
		for _, ax := range []struct {
			axis int
			what string
			hint int
			dst  *int
		}{{headAxis, "KV head count", fc.kvHeads, &m.info.KVHeads}, {rank - 1, "head dim", fc.headDim, &m.info.HeadDim}} {
			p, q := in.Dimensions[ax.axis], out.Dimensions[ax.axis]
			if p > 0 && q > 0 && p != q {
				return fmt.Errorf("%s disagrees: past %q has %d, present %q has %d", ax.what, in.Name, p, out.Name, q)
			}
			v := max(p, q)
			if v <= 0 {
				v = int64(ax.hint)
			}
			if v <= 0 {
				return fmt.Errorf("%s of %q is dynamic and no config gives it", ax.what, in.Name)
			}
			if *ax.dst != 0 && *ax.dst != int(v) {
				return fmt.Errorf("%s of %q is %d but other layers have %d", ax.what, in.Name, v, *ax.dst)
			}
			*ax.dst = int(v)
			dims[ax.axis] = v
		}
		m.slots = append(m.slots, &kvSlot{past: in.Name, present: out.Name, dims: dims, seqAxis: seqAxis})
		m.outputNames = append(m.outputNames, out.Name)
	}
	m.info.KVType = elemName(kvType)
	m.kvType = kvType
	m.kvElem = 4
	if kvType == ort.TensorElementDataTypeFloat16 {
		m.kvElem = 2
	}
	return nil
}

func presentName(re interface{ String() string }, layer int) string {
	// Patterns are "^prefix(\d+)suffix$" built by pattern(); rebuild the name.
	s := re.String()
	s = strings.TrimSuffix(strings.TrimPrefix(s, "^"), "$")
	i := strings.Index(s, `(\d+)`)
	return unquote(s[:i]) + fmt.Sprint(layer) + unquote(s[i+len(`(\d+)`):])
}

// unquote undoes regexp.QuoteMeta.
func unquote(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) {
			i++
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// Info describes the model.
func (m *Model) Info() Info { return m.info }

// Vocab is the logits width.
func (m *Model) Vocab() int { return m.info.Vocab }

// Context is the longest sequence Eval accepts (from the config files).
func (m *Model) Context() int { return m.info.Context }

// Seqs is 1: the graph's cache holds one sequence.
func (m *Model) Seqs() int { return 1 }

// MaxOutputs bounds the outputs of one Decode; every token's logits come
// out of the graph anyway.
func (m *Model) MaxOutputs() int { return maxOutputs }

const maxOutputs = 512

// Pos is the number of tokens in the cache.
func (m *Model) Pos() int { return m.pos }

// Reset empties the cache; its buffers are kept for the next sequence.
func (m *Model) Reset() {
	m.pos = 0
	m.outRows = m.outRows[:0]
}

// Close releases the session. The Go-side buffers go with the Model.
func (m *Model) Close() error {
	if m.closed {
		return nil
	}
	m.closed = true
	if err := m.sess.Destroy(); err != nil {
		return fmt.Errorf("onnx: close: %w", err)
	}
	return nil
}

// Logits copies output i's logits into dst.
func (m *Model) Logits(i int, dst []float32) error {
	if i < 0 || i >= len(m.outRows) {
		return fmt.Errorf("onnx: Logits of output %d: the last run has %d", i, len(m.outRows))
	}
	if len(dst) != m.info.Vocab {
		return fmt.Errorf("onnx: Logits: dst has %d elements, vocab is %d", len(dst), m.info.Vocab)
	}
	v, r := m.info.Vocab, m.outRows[i]
	if m.logitsT == ort.TensorElementDataTypeFloat16 {
		dtype.DequantizeRow(dtype.F16, dst, m.logitBuf[2*r*v:2*(r+1)*v])
	} else {
		dtype.DequantizeRow(dtype.F32, dst, m.logitBuf[4*r*v:4*(r+1)*v])
	}
	return nil
}

// Argmax writes the index of each output's largest logit (the first on
// ties, a number before a NaN), computed on the host: the logits are
// already here.
func (m *Model) Argmax(dst []int32) error {
	if len(dst) > len(m.outRows) {
		return fmt.Errorf("onnx: Argmax of %d outputs: the last run has %d", len(dst), len(m.outRows))
	}
	if cap(m.row) < m.info.Vocab {
		m.row = make([]float32, m.info.Vocab)
	}
	row := m.row[:m.info.Vocab]
	for i := range dst {
		if err := m.Logits(i, row); err != nil {
			return err
		}
		best := 0
		for j, v := range row {
			if v > row[best] || (math.IsNaN(float64(row[best])) && !math.IsNaN(float64(v))) {
				best = j
			}
		}
		dst[i] = int32(best)
	}
	return nil
}

// Decode implements engine.Model for the one sequence the graph holds: the
// tokens must be sequence 0's, at the positions that continue the cache.
func (m *Model) Decode(batch []engine.Item) error {
	if len(batch) == 0 {
		return errors.New("onnx: Decode of no tokens")
	}
	if cap(m.toks) < len(batch) {
		m.toks = make([]int32, len(batch))
	}
	toks := m.toks[:len(batch)]
	outputs := 0
	for i, it := range batch {
		if it.Seq != 0 {
			return fmt.Errorf("onnx: token %d of sequence %d: %w (one sequence)", i, it.Seq, engine.ErrUnsupported)
		}
		if int(it.Pos) != m.pos+i {
			return fmt.Errorf("onnx: token %d at position %d: positions must continue the cache at %d: %w", i, it.Pos, m.pos+i, engine.ErrUnsupported)
		}
		if it.Output {
			outputs++
		}
		toks[i] = it.Token
	}
	if outputs > maxOutputs {
		return fmt.Errorf("onnx: %d outputs in one batch, at most %d", outputs, maxOutputs)
	}
	if err := m.Eval(toks); err != nil {
		return err
	}
	m.outRows = m.outRows[:0]
	for i, it := range batch {
		if it.Output {
			m.outRows = append(m.outRows, i)
		}
	}
	return nil
}

// SeqRemove can drop a suffix of the sequence (or all of it): the caches
// are repacked to the shorter length.
func (m *Model) SeqRemove(seq, p0, p1 int) error {
	if seq > 0 {
		return fmt.Errorf("onnx: sequence %d: %w (one sequence)", seq, engine.ErrUnsupported)
	}
	p0 = max(p0, 0)
	if p0 >= m.pos || p1 >= 0 && p1 <= p0 {
		return nil
	}
	if p1 >= 0 && p1 < m.pos {
		return fmt.Errorf("onnx: removing positions [%d, %d) of %d: %w (only a suffix)", p0, p1, m.pos, engine.ErrUnsupported)
	}
	for _, s := range m.slots {
		s.truncate(m.pos, p0, m.kvElem)
	}
	m.pos = p0
	return nil
}

// truncate repacks the past in s.bufs[s.cur] from length from to length to:
// every run of seq entries (one per batch, head and key/value) moves down.
func (s *kvSlot) truncate(from, to, elem int) {
	outer, inner := 1, elem
	for i, d := range s.dims {
		switch {
		case i < s.seqAxis:
			outer *= int(d)
		case i > s.seqAxis:
			inner *= int(d)
		}
	}
	b := s.bufs[s.cur]
	for o := range outer {
		copy(b[o*to*inner:(o+1)*to*inner], b[o*from*inner:o*from*inner+to*inner])
	}
}

func (m *Model) SeqCopy(src, dst, p0, p1 int) error {
	if src == dst {
		return nil
	}
	return fmt.Errorf("onnx: SeqCopy: %w (one sequence)", engine.ErrUnsupported)
}

func (m *Model) SeqKeep(seq int) error {
	if seq != 0 {
		return fmt.Errorf("onnx: sequence %d: %w (one sequence)", seq, engine.ErrUnsupported)
	}
	return nil
}

func (m *Model) SeqShift(seq, p0, p1, delta int) error {
	return fmt.Errorf("onnx: moving positions: %w (the graph applies RoPE itself)", engine.ErrUnsupported)
}

func (m *Model) SeqPosMax(seq int) int {
	if seq != 0 {
		return -1
	}
	return m.pos - 1
}

func (m *Model) SeqState(int) ([]byte, error) {
	return nil, fmt.Errorf("onnx: sequence state: %w", engine.ErrUnsupported)
}

func (m *Model) SeqLoadState(int, []byte) error {
	return fmt.Errorf("onnx: sequence state: %w", engine.ErrUnsupported)
}

// Eval runs tokens at positions Pos() … Pos()+len(tokens)-1: the whole
// prompt in one pass with the cache so far as past, or one generated token;
// output 0 is then the last token's logits.
func (m *Model) Eval(tokens []int32) error {
	if m.closed {
		return errors.New("onnx: Eval on a closed model")
	}
	if len(tokens) == 0 {
		return errors.New("onnx: Eval with no tokens")
	}
	if m.pos+len(tokens) > m.info.Context {
		return fmt.Errorf("onnx: %d tokens at position %d exceed the context of %d", len(tokens), m.pos, m.info.Context)
	}
	for i, t := range tokens {
		if t < 0 || int(t) >= m.info.Vocab {
			return fmt.Errorf("onnx: token %d (index %d) is outside the vocabulary [0, %d)", t, i, m.info.Vocab)
		}
	}
	return m.step(tokens, nil, nil, true)
}

// step runs one pass. positions and mask override the defaults (past..,
// all ones) and usePast=false feeds an empty past without touching the
// cache; tests use them to show that each input really matters. The cache
// advances only for default runs.
func (m *Model) step(tokens []int32, positions, mask []int64, usePast bool) (err error) {
	n := len(tokens)
	past := m.pos
	if !usePast {
		past = 0
	}
	total := past + n
	for i := range m.inVals {
		m.inVals[i] = nil
	}
	for i := range m.outVals {
		m.outVals[i] = nil
	}
	defer func() {
		for _, v := range m.inVals {
			if v != nil {
				v.Destroy()
			}
		}
		for _, v := range m.outVals {
			if v != nil {
				v.Destroy()
			}
		}
	}()

	ids := grow(&m.i64[0], n)
	for i, t := range tokens {
		ids[i] = int64(t)
	}
	am := grow(&m.i64[1], total)
	if mask != nil {
		if len(mask) != total {
			return fmt.Errorf("onnx: mask of %d for %d positions", len(mask), total)
		}
		copy(am, mask)
	} else {
		for i := range am {
			am[i] = 1
		}
	}
	pids := grow(&m.i64[2], n)
	if positions != nil {
		if len(positions) != n {
			return fmt.Errorf("onnx: %d position ids for %d tokens", len(positions), n)
		}
		copy(pids, positions)
	} else {
		for i := range pids {
			pids[i] = int64(past + i)
		}
	}

	for i, role := range m.inputRole {
		var v ort.Value
		switch role {
		case roleIDs:
			v, err = m.intTensor(0, m.idsT, ids, n)
		case roleMask:
			v, err = m.intTensor(1, m.maskT, am, total)
		case rolePos:
			v, err = m.intTensor(2, m.posT, pids, n)
		default:
			s := m.slots[role]
			v, err = m.kvTensor(s, s.cur, past)
		}
		if err != nil {
			return fmt.Errorf("onnx: input %q: %w", m.inputNames[i], err)
		}
		m.inVals[i] = v
	}
	lb := 4
	if m.logitsT == ort.TensorElementDataTypeFloat16 {
		lb = 2
	}
	need := n * m.info.Vocab * lb
	if cap(m.logitBuf) < need {
		m.logitBuf = make([]byte, need)
	}
	m.outVals[0], err = ort.NewCustomDataTensor(ort.NewShape(1, int64(n), int64(m.info.Vocab)), m.logitBuf[:need], ort.TensorElementDataType(m.logitsT))
	if err != nil {
		return fmt.Errorf("onnx: logits: %w", err)
	}
	for i, s := range m.slots {
		if m.outVals[i+1], err = m.kvTensor(s, 1-s.cur, total); err != nil {
			return fmt.Errorf("onnx: output %q: %w", s.present, err)
		}
	}
	if err := m.sess.Run(m.inVals, m.outVals); err != nil {
		return fmt.Errorf("onnx: run at position %d (%d tokens): %w", past, n, err)
	}

	m.outRows = append(m.outRows[:0], n-1)
	if usePast && positions == nil && mask == nil {
		for _, s := range m.slots {
			s.cur = 1 - s.cur
		}
		m.pos = total
	}
	return nil
}

func grow[T any](p *[]T, n int) []T {
	if cap(*p) < n {
		*p = make([]T, n, max(n, 2*cap(*p)))
	}
	*p = (*p)[:n]
	return *p
}

// intTensor wraps the first n values as a [1, n] tensor of type t; int32
// inputs use their own scratch so the int64 values stay intact.
func (m *Model) intTensor(which int, t ort.TensorElementDataType, vals []int64, n int) (ort.Value, error) {
	shape := ort.NewShape(1, int64(n))
	if t == ort.TensorElementDataTypeInt32 {
		v32 := grow(&m.i32[which], n)
		for i := range v32 {
			v32[i] = int32(vals[i])
		}
		return ort.NewTensor(shape, v32)
	}
	return ort.NewTensor(shape, vals[:n])
}

// kvTensor wraps buffer b of slot s as a cache of seq positions. A buffer
// only grows while it is the spare one (about to receive the present) or
// still empty, so growing never has to copy: it doubles, starting at 64
// positions and capped at the context.
func (m *Model) kvTensor(s *kvSlot, b, seq int) (ort.Value, error) {
	shape := make(ort.Shape, len(s.dims))
	copy(shape, s.dims)
	shape[s.seqAxis] = int64(seq)
	need := int(shape.FlattenedSize()) * m.kvElem
	if cap(s.bufs[b]) < max(need, m.kvElem) {
		perPos := m.kvElem
		for i, d := range s.dims {
			if i != s.seqAxis {
				perPos *= int(d)
			}
		}
		want := max(2*cap(s.bufs[b]), perPos*min(64, m.info.Context))
		want = max(min(want, perPos*m.info.Context), need, m.kvElem)
		s.bufs[b] = make([]byte, want)
	}
	// ONNX Runtime wants at least one byte behind a tensor even when it is
	// empty (the first pass has past length 0).
	return ort.NewCustomDataTensor(shape, s.bufs[b][:max(need, m.kvElem)], m.kvType)
}
