package gguf

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"

	"github.com/aotlm/aotlm/internal/format"
	"github.com/aotlm/aotlm/internal/tensor"
)

// WriteTensor is one tensor to write. Give one of Data (the stored bytes,
// exactly the size of Shape in DType), Values (float32 values, converted or
// quantized to DType: F32, F16, BF16, Q8_0 or Q4_0) or Stream. Data may be
// any of F32, F16, BF16, F64, I8, I16, I32, I64, Q8_0, Q4_0.
type WriteTensor struct {
	Name   string
	DType  tensor.DType
	Shape  []int64 // outermost first, at most 4 dimensions
	Data   []byte
	Values []float32
	// Stream, when set, writes the stored bytes (exactly the size of Shape
	// in DType) when the tensor's turn comes, so that a file larger than
	// memory can be written; Write calls it once, in tensor order.
	Stream func(w io.Writer) error
}

// Write writes a GGUF version 3 file: kv in the given order, then tensors in
// the given order, each starting at a multiple of the alignment (32, or the
// value of a "general.alignment" entry in kv). Values follow KV's native
// types; a []any is an array whose elements all have one type (an empty
// []any is written as an empty array of arrays).
func Write(w io.Writer, kv []KV, tensors []WriteTensor) error {
	align := int64(defaultAlignment)
	seen := make(map[string]bool, len(kv))
	var head []byte
	head = append(head, magic...)
	head = binary.LittleEndian.AppendUint32(head, 3)
	head = binary.LittleEndian.AppendUint64(head, uint64(len(tensors)))
	head = binary.LittleEndian.AppendUint64(head, uint64(len(kv)))
	for _, e := range kv {
		if seen[e.Key] {
			return fmt.Errorf("gguf: write: duplicate metadata key %q", e.Key)
		}
		seen[e.Key] = true
		if e.Key == alignmentKey {
			a, ok := format.MetaInt(map[string]any{e.Key: widen(e.Value)}, e.Key)
			if !ok || !validAlignment(a) {
				return fmt.Errorf("gguf: write: %s = %v is not a power of two in [1, %d]", e.Key, e.Value, maxAlignment)
			}
			align = a
		}
		head = appendString(head, e.Key)
		t, err := valueType(e.Value)
		if err != nil {
			return fmt.Errorf("gguf: write: metadata %q: %w", e.Key, err)
		}
		head = binary.LittleEndian.AppendUint32(head, uint32(t))
		if head, err = appendValue(head, e.Value); err != nil {
			return fmt.Errorf("gguf: write: metadata %q: %w", e.Key, err)
		}
	}

	datas := make([][]byte, len(tensors))
	sizes := make([]int64, len(tensors))
	names := make(map[string]bool, len(tensors))
	var off int64
	for i, t := range tensors {
		if t.Name == "" {
			return fmt.Errorf("gguf: write: tensor %d has an empty name", i)
		}
		if names[t.Name] {
			return fmt.Errorf("gguf: write: duplicate tensor name %q", t.Name)
		}
		names[t.Name] = true
		typ, data, size, err := tensorBytes(t)
		if err != nil {
			return fmt.Errorf("gguf: write: tensor %q: %w", t.Name, err)
		}
		datas[i], sizes[i] = data, size
		head = appendString(head, t.Name)
		head = binary.LittleEndian.AppendUint32(head, uint32(len(t.Shape)))
		for j := len(t.Shape) - 1; j >= 0; j-- { // innermost first
			head = binary.LittleEndian.AppendUint64(head, uint64(t.Shape[j]))
		}
		head = binary.LittleEndian.AppendUint32(head, uint32(typ))
		head = binary.LittleEndian.AppendUint64(head, uint64(off))
		off = alignUp(off+size, align)
	}

	bw := bufio.NewWriter(w)
	bw.Write(head)
	writePad(bw, int64(len(head)), align)
	for i, data := range datas {
		if s := tensors[i].Stream; s != nil {
			cw := &countWriter{w: bw}
			if err := s(cw); err != nil {
				return fmt.Errorf("gguf: write: tensor %q: %w", tensors[i].Name, err)
			}
			if cw.n != sizes[i] {
				return fmt.Errorf("gguf: write: tensor %q: its stream wrote %d bytes, shape %v of %v needs %d", tensors[i].Name, cw.n, tensors[i].Shape, tensors[i].DType, sizes[i])
			}
		} else {
			bw.Write(data)
		}
		writePad(bw, sizes[i], align)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("gguf: write: %w", err)
	}
	return nil
}

// countWriter counts the bytes written through it.
type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

func alignUp(n, a int64) int64 { return (n + a - 1) / a * a }

var zeros [4096]byte

// writePad writes the zero bytes that take n up to a multiple of a. Errors
// stick in bw and surface at Flush.
func writePad(bw *bufio.Writer, n, a int64) {
	for pad := alignUp(n, a) - n; pad > 0; pad -= min(pad, int64(len(zeros))) {
		bw.Write(zeros[:min(pad, int64(len(zeros)))])
	}
}

// tensorBytes validates t and returns its ggml type, stored bytes (nil for
// a stream) and their size.
func tensorBytes(t WriteTensor) (GGMLType, []byte, int64, error) {
	typ, data, err := tensorData(t)
	if err != nil {
		return 0, nil, 0, err
	}
	n, _ := tensor.NumElements(t.Shape)
	size, _ := t.DType.ByteSize(n)
	return typ, data, size, nil
}

// tensorData validates t and returns its ggml type and stored bytes (nil
// for a stream).
func tensorData(t WriteTensor) (GGMLType, []byte, error) {
	typ, ok := typeOfDType(t.DType)
	if !ok {
		return 0, nil, fmt.Errorf("dtype %v cannot be written", t.DType)
	}
	if len(t.Shape) > maxDims {
		return 0, nil, fmt.Errorf("%d dimensions, at most %d", len(t.Shape), maxDims)
	}
	n, err := tensor.NumElements(t.Shape)
	if err != nil {
		return 0, nil, err
	}
	if row := rowLen(t.Shape); row%typ.BlockSize() != 0 {
		return 0, nil, fmt.Errorf("row of %d values is not a whole number of %v blocks of %d", row, typ, typ.BlockSize())
	}
	size, err := t.DType.ByteSize(n)
	if err != nil {
		return 0, nil, err
	}
	if t.Stream != nil {
		if t.Data != nil || t.Values != nil {
			return 0, nil, fmt.Errorf("a stream and also Data or Values set")
		}
		return typ, nil, nil
	}
	if t.Values == nil {
		if int64(len(t.Data)) != size {
			return 0, nil, fmt.Errorf("%d bytes of data, shape %v of %v needs %d", len(t.Data), t.Shape, t.DType, size)
		}
		return typ, t.Data, nil
	}
	if t.Data != nil {
		return 0, nil, fmt.Errorf("both Data and Values set")
	}
	if int64(len(t.Values)) != n {
		return 0, nil, fmt.Errorf("%d values, shape %v needs %d", len(t.Values), t.Shape, n)
	}
	le := binary.LittleEndian
	var out []byte
	switch t.DType {
	case tensor.F32:
		for _, v := range t.Values {
			out = le.AppendUint32(out, math.Float32bits(v))
		}
	case tensor.F16:
		for _, v := range t.Values {
			out = le.AppendUint16(out, tensor.F32ToF16(v))
		}
	case tensor.BF16:
		for _, v := range t.Values {
			out = le.AppendUint16(out, tensor.F32ToBF16(v))
		}
	case tensor.Q8_0:
		out = QuantizeQ8_0(t.Values)
	case tensor.Q4_0:
		out = QuantizeQ4_0(t.Values)
	default:
		return 0, nil, fmt.Errorf("float32 values cannot be converted to %v; give Data", t.DType)
	}
	return typ, out, nil
}

func appendString(b []byte, s string) []byte {
	b = binary.LittleEndian.AppendUint64(b, uint64(len(s)))
	return append(b, s...)
}

// valueType returns the GGUF type tag of a native value.
func valueType(v any) (ValueType, error) {
	switch v.(type) {
	case uint8:
		return ValueUint8, nil
	case int8:
		return ValueInt8, nil
	case uint16:
		return ValueUint16, nil
	case int16:
		return ValueInt16, nil
	case uint32:
		return ValueUint32, nil
	case int32:
		return ValueInt32, nil
	case float32:
		return ValueFloat32, nil
	case bool:
		return ValueBool, nil
	case string:
		return ValueString, nil
	case uint64:
		return ValueUint64, nil
	case int64:
		return ValueInt64, nil
	case float64:
		return ValueFloat64, nil
	case []uint8, []int8, []uint16, []int16, []uint32, []int32, []float32, []bool,
		[]string, []uint64, []int64, []float64, []any:
		return ValueArray, nil
	}
	return 0, fmt.Errorf("value of Go type %T has no GGUF type", v)
}

// appendValue appends the encoding of v (without its type tag).
func appendValue(b []byte, v any) ([]byte, error) {
	le := binary.LittleEndian
	switch x := v.(type) {
	case uint8:
		return append(b, x), nil
	case int8:
		return append(b, byte(x)), nil
	case uint16:
		return le.AppendUint16(b, x), nil
	case int16:
		return le.AppendUint16(b, uint16(x)), nil
	case uint32:
		return le.AppendUint32(b, x), nil
	case int32:
		return le.AppendUint32(b, uint32(x)), nil
	case float32:
		return le.AppendUint32(b, math.Float32bits(x)), nil
	case bool:
		if x {
			return append(b, 1), nil
		}
		return append(b, 0), nil
	case string:
		return appendString(b, x), nil
	case uint64:
		return le.AppendUint64(b, x), nil
	case int64:
		return le.AppendUint64(b, uint64(x)), nil
	case float64:
		return le.AppendUint64(b, math.Float64bits(x)), nil
	case []uint8:
		return appendArray(b, ValueUint8, x)
	case []int8:
		return appendArray(b, ValueInt8, x)
	case []uint16:
		return appendArray(b, ValueUint16, x)
	case []int16:
		return appendArray(b, ValueInt16, x)
	case []uint32:
		return appendArray(b, ValueUint32, x)
	case []int32:
		return appendArray(b, ValueInt32, x)
	case []float32:
		return appendArray(b, ValueFloat32, x)
	case []bool:
		return appendArray(b, ValueBool, x)
	case []string:
		return appendArray(b, ValueString, x)
	case []uint64:
		return appendArray(b, ValueUint64, x)
	case []int64:
		return appendArray(b, ValueInt64, x)
	case []float64:
		return appendArray(b, ValueFloat64, x)
	case []any:
		elem := ValueArray
		if len(x) > 0 {
			t, err := valueType(x[0])
			if err != nil {
				return nil, fmt.Errorf("element 0: %w", err)
			}
			elem = t
		}
		for i, e := range x {
			if t, err := valueType(e); err != nil || t != elem {
				return nil, fmt.Errorf("element %d (%T) differs in type from element 0 (%v)", i, e, elem)
			}
		}
		return appendArray(b, elem, x)
	}
	return nil, fmt.Errorf("value of Go type %T has no GGUF type", v)
}

func appendArray[T any](b []byte, elem ValueType, s []T) ([]byte, error) {
	b = binary.LittleEndian.AppendUint32(b, uint32(elem))
	b = binary.LittleEndian.AppendUint64(b, uint64(len(s)))
	var err error
	for i, e := range s {
		if b, err = appendValue(b, any(e)); err != nil {
			return nil, fmt.Errorf("element %d: %w", i, err)
		}
	}
	return b, nil
}

// WriteFile writes a GGUF file of kv and tensors to path through a
// temporary file in the same folder, renamed over path only once the
// whole file is written; on an error path is untouched and the temporary
// file removed.
func WriteFile(path string, kv []KV, tensors []WriteTensor) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".gguf-*")
	if err != nil {
		return fmt.Errorf("gguf: writing %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	bw := bufio.NewWriterSize(tmp, 1<<20)
	err = Write(bw, kv, tensors)
	if err == nil {
		err = bw.Flush()
	}
	if err == nil {
		err = tmp.Chmod(0o644)
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		return fmt.Errorf("gguf: writing %s: %w", path, err)
	}
	return nil
}
