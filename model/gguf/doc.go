// Package gguf reads and writes GGUF, the llama.cpp model file format:
// typed metadata (hyper-parameters, the tokenizer) followed by named tensors
// in ggml's storage types.
//
// The reader accepts versions 2 and 3, little-endian. It maps the file and
// hands out tensor data as slices of the mapping, without copying. Every
// count, length and offset is checked against the file size before anything
// is sliced or allocated, so a damaged or hostile file gives an error naming
// the key or tensor and the offset, never a panic or an enormous allocation.
// *File is a model.Source.
//
// The writer produces version 3 files laid out as llama.cpp lays them out;
// tensors may be streamed from a function so that large models are never
// held in memory.
package gguf
