package gguf

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Metadata values keep their stored type in memory ("native" form):
//
//	u8 i8 u16 i16 u32 i32 u64 i64 -> uint8 int8 uint16 int16 uint32 int32 uint64 int64
//	f32 f64 bool string           -> float32 float64 bool string
//	array of a scalar or string   -> []uint8 ... []float64, []bool, []string
//	array of arrays               -> []any whose elements are arrays
//
// so a file read with KVs and written back with Write keeps every type. The
// Checkpoint view (Metadata) widens scalars: unsigned -> uint64, signed ->
// int64, floats -> float64. Arrays stay the typed slices above, shared with
// KVs: a vocabulary of a million tokens is one []string, not a million
// interface values (format.List gives a short array as []any).

// maxArrayDepth bounds the nesting of arrays (each level is 12 header bytes,
// so without a bound a file could nest deeper than the stack wants).
const maxArrayDepth = 16

// readValue decodes one value of type t.
func (d *decoder) readValue(t ValueType, depth int) (any, error) {
	switch t {
	case ValueUint8:
		return d.u8()
	case ValueInt8:
		v, err := d.u8()
		return int8(v), err
	case ValueUint16:
		return d.u16()
	case ValueInt16:
		v, err := d.u16()
		return int16(v), err
	case ValueUint32:
		return d.u32()
	case ValueInt32:
		v, err := d.u32()
		return int32(v), err
	case ValueFloat32:
		v, err := d.u32()
		return math.Float32frombits(v), err
	case ValueBool:
		v, err := d.u8()
		if err != nil {
			return nil, err
		}
		if v > 1 {
			return nil, fmt.Errorf("bool byte %d is neither 0 nor 1", v)
		}
		return v == 1, nil
	case ValueString:
		return d.str()
	case ValueUint64:
		return d.u64()
	case ValueInt64:
		v, err := d.u64()
		return int64(v), err
	case ValueFloat64:
		v, err := d.u64()
		return math.Float64frombits(v), err
	case ValueArray:
		return d.readArray(depth + 1)
	}
	return nil, fmt.Errorf("unknown value type %d", uint32(t))
}

// readArray decodes an array header and its elements.
func (d *decoder) readArray(depth int) (any, error) {
	if depth > maxArrayDepth {
		return nil, fmt.Errorf("arrays nested deeper than %d", maxArrayDepth)
	}
	et, err := d.u32()
	if err != nil {
		return nil, err
	}
	elem := ValueType(et)
	size := elem.minSize()
	if size == 0 {
		return nil, fmt.Errorf("unknown array element type %d", et)
	}
	n, err := d.count(size)
	if err != nil {
		return nil, err
	}
	switch elem {
	case ValueString:
		out := make([]string, n)
		for i := range out {
			if out[i], err = d.str(); err != nil {
				return nil, fmt.Errorf("element %d: %w", i, err)
			}
		}
		return out, nil
	case ValueArray:
		out := make([]any, n)
		for i := range out {
			if out[i], err = d.readArray(depth + 1); err != nil {
				return nil, fmt.Errorf("element %d: %w", i, err)
			}
		}
		return out, nil
	}
	// Fixed-size elements: one read, then decode.
	b, err := d.next(n * size)
	if err != nil {
		return nil, err
	}
	return decodeFixed(elem, b, int(n))
}

// decodeFixed decodes n fixed-size elements of type t from b.
func decodeFixed(t ValueType, b []byte, n int) (any, error) {
	le := binary.LittleEndian
	switch t {
	case ValueUint8:
		return append([]uint8(nil), b...), nil
	case ValueInt8:
		out := make([]int8, n)
		for i := range out {
			out[i] = int8(b[i])
		}
		return out, nil
	case ValueBool:
		out := make([]bool, n)
		for i := range out {
			if b[i] > 1 {
				return nil, fmt.Errorf("element %d: bool byte %d is neither 0 nor 1", i, b[i])
			}
			out[i] = b[i] == 1
		}
		return out, nil
	case ValueUint16:
		out := make([]uint16, n)
		for i := range out {
			out[i] = le.Uint16(b[2*i:])
		}
		return out, nil
	case ValueInt16:
		out := make([]int16, n)
		for i := range out {
			out[i] = int16(le.Uint16(b[2*i:]))
		}
		return out, nil
	case ValueUint32:
		out := make([]uint32, n)
		for i := range out {
			out[i] = le.Uint32(b[4*i:])
		}
		return out, nil
	case ValueInt32:
		out := make([]int32, n)
		for i := range out {
			out[i] = int32(le.Uint32(b[4*i:]))
		}
		return out, nil
	case ValueFloat32:
		out := make([]float32, n)
		for i := range out {
			out[i] = math.Float32frombits(le.Uint32(b[4*i:]))
		}
		return out, nil
	case ValueUint64:
		out := make([]uint64, n)
		for i := range out {
			out[i] = le.Uint64(b[8*i:])
		}
		return out, nil
	case ValueInt64:
		out := make([]int64, n)
		for i := range out {
			out[i] = int64(le.Uint64(b[8*i:]))
		}
		return out, nil
	case ValueFloat64:
		out := make([]float64, n)
		for i := range out {
			out[i] = math.Float64frombits(le.Uint64(b[8*i:]))
		}
		return out, nil
	}
	return nil, fmt.Errorf("value type %v is not fixed-size", t)
}

// widen converts a native value to the Checkpoint metadata form.
func widen(v any) any {
	switch x := v.(type) {
	case uint8:
		return uint64(x)
	case uint16:
		return uint64(x)
	case uint32:
		return uint64(x)
	case int8:
		return int64(x)
	case int16:
		return int64(x)
	case int32:
		return int64(x)
	case float32:
		return float64(x)
	}
	return v // uint64, int64, float64, bool, string, and arrays as they are
}
