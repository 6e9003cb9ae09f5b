package onnxexport

import (
	"encoding/binary"
	"math"

	"github.com/aotlm/aotlm/internal/onnx"
)

// externalMin is the smallest tensor, in bytes, stored in the weights file
// rather than inline in a graph.
const externalMin = 1024

// align is the offset alignment of tensors in the weights file.
const align = 64

// store holds the weights file both graphs read: each tensor is written
// once and every graph that uses it names the same range.
type store struct {
	file    string // the weights file's name, beside the graphs
	data    []byte
	tensors map[string]onnx.Tensor
}

func newStore(file string) *store {
	return &store{file: file, tensors: map[string]onnx.Tensor{}}
}

// put returns the initializer called name, adding it to the weights file
// (or inline, when small) the first time; bytes computes its raw data.
func (s *store) put(name string, typ onnx.DataType, dims []int64, bytes func() []byte) onnx.Tensor {
	if t, ok := s.tensors[name]; ok {
		return t
	}
	raw := bytes()
	t := onnx.Tensor{Name: name, Type: typ, Dims: dims}
	if len(raw) < externalMin {
		t.Raw = raw
	} else {
		for len(s.data)%align != 0 {
			s.data = append(s.data, 0)
		}
		t.Location, t.Offset, t.Length = s.file, int64(len(s.data)), int64(len(raw))
		s.data = append(s.data, raw...)
	}
	s.tensors[name] = t
	return t
}

func floatBytes(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

func int64Bytes(v []int64) []byte {
	b := make([]byte, 8*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint64(b[8*i:], uint64(x))
	}
	return b
}

// int4Bytes packs signed 4-bit values (in [-8, 7]) two a byte, the first
// in the low nibble, as ONNX stores INT4.
func int4Bytes(v []int8) []byte {
	b := make([]byte, (len(v)+1)/2)
	for i, x := range v {
		b[i/2] |= byte(x&0xF) << (4 * (i % 2))
	}
	return b
}
