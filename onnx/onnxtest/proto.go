// Package onnxtest writes ONNX models from Go, so that the onnx package's
// tests (and demos) run on graphs the project made itself rather than on
// downloaded files. It holds a minimal protobuf wire-format encoder for the
// few ONNX messages a decoder graph needs, and WriteGemmaLike, which builds a
// model with Gemma 3 270M's exact input/output signature.
package onnxtest

import (
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"path/filepath"
)

// DataType is onnx.TensorProto.DataType.
type DataType int32

// The element types the writer uses (values from onnx.proto).
const (
	Float   DataType = 1
	Int32   DataType = 6
	Int64   DataType = 7
	Bool    DataType = 9
	Float16 DataType = 10
)

// Dim is one dimension of a ValueInfo: a symbolic name (Param) or a size.
type Dim struct {
	Param string
	Value int64
}

// P and N build symbolic and fixed dimensions.
func P(name string) Dim { return Dim{Param: name} }
func N(v int64) Dim     { return Dim{Value: v} }

// ValueInfo declares a graph input or output tensor.
type ValueInfo struct {
	Name string
	Type DataType
	Dims []Dim
}

// Tensor is an initializer or a constant. Exactly one of Float, Int64 or
// Raw holds its data (Raw is already in little-endian element layout).
type Tensor struct {
	Name  string
	Type  DataType
	Dims  []int64
	Float []float32
	Int64 []int64
	Raw   []byte
}

// raw returns the tensor's data as little-endian bytes.
func (t *Tensor) raw() []byte {
	switch {
	case t.Raw != nil:
		return t.Raw
	case t.Float != nil:
		b := make([]byte, 4*len(t.Float))
		for i, f := range t.Float {
			binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(f))
		}
		return b
	case t.Int64 != nil:
		b := make([]byte, 8*len(t.Int64))
		for i, v := range t.Int64 {
			binary.LittleEndian.PutUint64(b[8*i:], uint64(v))
		}
		return b
	}
	return nil
}

// Attr is a node attribute; build it with AttrInt, AttrInts, AttrFloat or
// AttrTensor.
type Attr struct {
	name   string
	kind   int32 // onnx.AttributeProto.AttributeType
	i      int64
	f      float32
	ints   []int64
	tensor *Tensor
}

// AttrInt, AttrInts, AttrFloat and AttrTensor make node attributes.
func AttrInt(name string, v int64) Attr      { return Attr{name: name, kind: 2, i: v} }
func AttrInts(name string, v ...int64) Attr  { return Attr{name: name, kind: 7, ints: v} }
func AttrFloat(name string, v float32) Attr  { return Attr{name: name, kind: 1, f: v} }
func AttrTensor(name string, t *Tensor) Attr { return Attr{name: name, kind: 4, tensor: t} }

// Node is one operator application in the default ONNX domain.
type Node struct {
	Op    string
	Name  string
	In    []string
	Out   []string
	Attrs []Attr
}

// Graph is a model's single graph.
type Graph struct {
	Name    string
	Nodes   []Node
	Init    []*Tensor
	Inputs  []ValueInfo
	Outputs []ValueInfo
}

// Model is an ONNX model using one opset of the default domain.
type Model struct {
	Opset int64 // default 17
	Graph Graph
}

// irVersionFor is the IR version that introduced each opset family we use;
// ORT rejects a model whose IR version is older than its opset needs.
func irVersionFor(opset int64) int64 {
	switch {
	case opset >= 21:
		return 10
	case opset >= 19:
		return 9
	default:
		return 8
	}
}

// Write saves m to path. When external is not empty, every initializer of
// at least externalMin bytes goes to the file of that name next to path
// (ONNX external data, offsets aligned to 64 bytes as the converters do), so
// that ORT has to resolve it relative to the model's folder.
func (m *Model) Write(path, external string) error {
	var ext *os.File
	var extOff int64
	if external != "" {
		f, err := os.Create(filepath.Join(filepath.Dir(path), external))
		if err != nil {
			return fmt.Errorf("onnxtest: %w", err)
		}
		defer f.Close()
		ext = f
	}
	const externalMin = 1024
	var g buf
	g.str(2, m.Graph.Name)
	for i := range m.Graph.Nodes {
		g.msg(1, encodeNode(&m.Graph.Nodes[i]))
	}
	for _, t := range m.Graph.Init {
		raw := t.raw()
		if ext != nil && len(raw) >= externalMin {
			if pad := (64 - extOff%64) % 64; pad > 0 {
				if _, err := ext.Write(make([]byte, pad)); err != nil {
					return fmt.Errorf("onnxtest: %w", err)
				}
				extOff += pad
			}
			if _, err := ext.Write(raw); err != nil {
				return fmt.Errorf("onnxtest: %w", err)
			}
			g.msg(5, encodeExternalTensor(t, external, extOff, int64(len(raw))))
			extOff += int64(len(raw))
			continue
		}
		g.msg(5, encodeTensor(t))
	}
	for _, v := range m.Graph.Inputs {
		g.msg(11, encodeValueInfo(v))
	}
	for _, v := range m.Graph.Outputs {
		g.msg(12, encodeValueInfo(v))
	}
	opset := m.Opset
	if opset == 0 {
		opset = 17
	}
	var op buf
	op.str(1, "")
	op.varint(2, uint64(opset))
	var b buf
	b.varint(1, uint64(irVersionFor(opset)))
	b.str(2, "glint-onnxtest")
	b.msg(7, g.b)
	b.msg(8, op.b)
	if err := os.WriteFile(path, b.b, 0o644); err != nil {
		return fmt.Errorf("onnxtest: %w", err)
	}
	return nil
}

func encodeNode(n *Node) []byte {
	var b buf
	for _, s := range n.In {
		b.strAlways(1, s)
	}
	for _, s := range n.Out {
		b.strAlways(2, s)
	}
	b.str(3, n.Name)
	b.str(4, n.Op)
	for _, a := range n.Attrs {
		b.msg(5, encodeAttr(a))
	}
	return b.b
}

func encodeAttr(a Attr) []byte {
	var b buf
	b.str(1, a.name)
	switch a.kind {
	case 1:
		b.tag(2, 5)
		b.b = binary.LittleEndian.AppendUint32(b.b, math.Float32bits(a.f))
	case 2:
		b.varintAlways(3, uint64(a.i))
	case 4:
		b.msg(5, encodeTensor(a.tensor))
	case 7:
		for _, v := range a.ints {
			b.varintAlways(8, uint64(v))
		}
	}
	b.varint(20, uint64(a.kind))
	return b.b
}

func encodeTensorHeader(b *buf, t *Tensor) {
	for _, d := range t.Dims {
		b.varintAlways(1, uint64(d))
	}
	b.varint(2, uint64(t.Type))
	b.str(8, t.Name)
}

func encodeTensor(t *Tensor) []byte {
	var b buf
	encodeTensorHeader(&b, t)
	b.bytes(9, t.raw())
	return b.b
}

func encodeExternalTensor(t *Tensor, location string, off, n int64) []byte {
	var b buf
	encodeTensorHeader(&b, t)
	for _, kv := range [][2]string{{"location", location}, {"offset", fmt.Sprint(off)}, {"length", fmt.Sprint(n)}} {
		var e buf
		e.str(1, kv[0])
		e.str(2, kv[1])
		b.msg(13, e.b)
	}
	b.varint(14, 1) // data_location = EXTERNAL
	return b.b
}

func encodeValueInfo(v ValueInfo) []byte {
	var shape buf
	for _, d := range v.Dims {
		var dim buf
		if d.Param != "" {
			dim.str(2, d.Param)
		} else {
			dim.varintAlways(1, uint64(d.Value))
		}
		shape.msg(1, dim.b)
	}
	var tt buf
	tt.varint(1, uint64(v.Type))
	tt.msg(2, shape.b)
	var typ buf
	typ.msg(1, tt.b)
	var b buf
	b.str(1, v.Name)
	b.msg(2, typ.b)
	return b.b
}

// buf is a protobuf wire-format encoder. Zero scalars and empty strings are
// skipped (proto3 defaults) except through the *Always variants, which
// repeated fields need.
type buf struct{ b []byte }

func (b *buf) tag(field int, wire int) {
	b.b = binary.AppendUvarint(b.b, uint64(field)<<3|uint64(wire))
}

func (b *buf) varintAlways(field int, v uint64) {
	b.tag(field, 0)
	b.b = binary.AppendUvarint(b.b, v)
}

func (b *buf) varint(field int, v uint64) {
	if v != 0 {
		b.varintAlways(field, v)
	}
}

func (b *buf) bytes(field int, v []byte) {
	b.tag(field, 2)
	b.b = binary.AppendUvarint(b.b, uint64(len(v)))
	b.b = append(b.b, v...)
}

func (b *buf) strAlways(field int, s string) { b.bytes(field, []byte(s)) }

func (b *buf) str(field int, s string) {
	if s != "" {
		b.strAlways(field, s)
	}
}

func (b *buf) msg(field int, m []byte) { b.bytes(field, m) }
