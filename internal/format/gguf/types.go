package gguf

import (
	"fmt"

	"github.com/aotlm/aotlm/internal/tensor"
)

// GGMLType is a ggml tensor element type as stored in a tensor info.
type GGMLType uint32

// The ggml tensor types. Numbers 4, 5 and 31-33, 36-38 were retired by ggml.
const (
	TypeF32     GGMLType = 0
	TypeF16     GGMLType = 1
	TypeQ4_0    GGMLType = 2
	TypeQ4_1    GGMLType = 3
	TypeQ5_0    GGMLType = 6
	TypeQ5_1    GGMLType = 7
	TypeQ8_0    GGMLType = 8
	TypeQ8_1    GGMLType = 9
	TypeQ2_K    GGMLType = 10
	TypeQ3_K    GGMLType = 11
	TypeQ4_K    GGMLType = 12
	TypeQ5_K    GGMLType = 13
	TypeQ6_K    GGMLType = 14
	TypeQ8_K    GGMLType = 15
	TypeIQ2_XXS GGMLType = 16
	TypeIQ2_XS  GGMLType = 17
	TypeIQ3_XXS GGMLType = 18
	TypeIQ1_S   GGMLType = 19
	TypeIQ4_NL  GGMLType = 20
	TypeIQ3_S   GGMLType = 21
	TypeIQ2_S   GGMLType = 22
	TypeIQ4_XS  GGMLType = 23
	TypeI8      GGMLType = 24
	TypeI16     GGMLType = 25
	TypeI32     GGMLType = 26
	TypeI64     GGMLType = 27
	TypeF64     GGMLType = 28
	TypeIQ1_M   GGMLType = 29
	TypeBF16    GGMLType = 30
	TypeTQ1_0   GGMLType = 34
	TypeTQ2_0   GGMLType = 35
	TypeMXFP4   GGMLType = 39
	TypeNVFP4   GGMLType = 40
	TypeQ1_0    GGMLType = 41
	TypeQ2_0    GGMLType = 42
)

// typeInfo is one row of the ggml type table: values per block, bytes per
// block, and the tensor.DType with the same storage (Invalid when none).
type typeInfo struct {
	name       string
	blockSize  int64
	blockBytes int64
	dtype      tensor.DType
}

// ggmlTypes holds the block geometry of every ggml type (ggml's type traits).
var ggmlTypes = map[GGMLType]typeInfo{
	TypeF32:     {"F32", 1, 4, tensor.F32},
	TypeF16:     {"F16", 1, 2, tensor.F16},
	TypeQ4_0:    {"Q4_0", 32, 18, tensor.Q4_0},
	TypeQ4_1:    {"Q4_1", 32, 20, tensor.Invalid},
	TypeQ5_0:    {"Q5_0", 32, 22, tensor.Invalid},
	TypeQ5_1:    {"Q5_1", 32, 24, tensor.Invalid},
	TypeQ8_0:    {"Q8_0", 32, 34, tensor.Q8_0},
	TypeQ8_1:    {"Q8_1", 32, 36, tensor.Invalid},
	TypeQ2_K:    {"Q2_K", 256, 84, tensor.Invalid},
	TypeQ3_K:    {"Q3_K", 256, 110, tensor.Invalid},
	TypeQ4_K:    {"Q4_K", 256, 144, tensor.Invalid},
	TypeQ5_K:    {"Q5_K", 256, 176, tensor.Invalid},
	TypeQ6_K:    {"Q6_K", 256, 210, tensor.Invalid},
	TypeQ8_K:    {"Q8_K", 256, 292, tensor.Invalid},
	TypeIQ2_XXS: {"IQ2_XXS", 256, 66, tensor.Invalid},
	TypeIQ2_XS:  {"IQ2_XS", 256, 74, tensor.Invalid},
	TypeIQ3_XXS: {"IQ3_XXS", 256, 98, tensor.Invalid},
	TypeIQ1_S:   {"IQ1_S", 256, 50, tensor.Invalid},
	TypeIQ4_NL:  {"IQ4_NL", 32, 18, tensor.Invalid},
	TypeIQ3_S:   {"IQ3_S", 256, 110, tensor.Invalid},
	TypeIQ2_S:   {"IQ2_S", 256, 82, tensor.Invalid},
	TypeIQ4_XS:  {"IQ4_XS", 256, 136, tensor.Invalid},
	TypeI8:      {"I8", 1, 1, tensor.I8},
	TypeI16:     {"I16", 1, 2, tensor.I16},
	TypeI32:     {"I32", 1, 4, tensor.I32},
	TypeI64:     {"I64", 1, 8, tensor.I64},
	TypeF64:     {"F64", 1, 8, tensor.F64},
	TypeIQ1_M:   {"IQ1_M", 256, 56, tensor.Invalid},
	TypeBF16:    {"BF16", 1, 2, tensor.BF16},
	TypeTQ1_0:   {"TQ1_0", 256, 54, tensor.Invalid},
	TypeTQ2_0:   {"TQ2_0", 256, 66, tensor.Invalid},
	TypeMXFP4:   {"MXFP4", 32, 17, tensor.Invalid},
	TypeNVFP4:   {"NVFP4", 64, 36, tensor.Invalid},
	TypeQ1_0:    {"Q1_0", 128, 18, tensor.Invalid},
	TypeQ2_0:    {"Q2_0", 64, 18, tensor.Invalid},
}

// String returns ggml's name of t ("F32", "Q4_K", ...), or "type(N)" for a
// number ggml does not define.
func (t GGMLType) String() string {
	if ti, ok := ggmlTypes[t]; ok {
		return ti.name
	}
	return fmt.Sprintf("type(%d)", uint32(t))
}

// Known reports whether t is a ggml type this package knows the block size of.
func (t GGMLType) Known() bool {
	_, ok := ggmlTypes[t]
	return ok
}

// BlockSize is the number of values in one block of t (1 for plain types, 0
// for unknown types).
func (t GGMLType) BlockSize() int64 { return ggmlTypes[t].blockSize }

// BlockBytes is the number of bytes of one block of t (0 for unknown types).
func (t GGMLType) BlockBytes() int64 { return ggmlTypes[t].blockBytes }

// DType returns the tensor.DType stored the same way as t, or tensor.Invalid
// when aotlm has no such dtype (the k-quants, i-quants, ...).
func (t GGMLType) DType() tensor.DType { return ggmlTypes[t].dtype }

// typeOfDType maps the dtypes the writer accepts to their ggml type.
func typeOfDType(d tensor.DType) (GGMLType, bool) {
	switch d {
	case tensor.F32:
		return TypeF32, true
	case tensor.F16:
		return TypeF16, true
	case tensor.BF16:
		return TypeBF16, true
	case tensor.F64:
		return TypeF64, true
	case tensor.I8:
		return TypeI8, true
	case tensor.I16:
		return TypeI16, true
	case tensor.I32:
		return TypeI32, true
	case tensor.I64:
		return TypeI64, true
	case tensor.Q8_0:
		return TypeQ8_0, true
	case tensor.Q4_0:
		return TypeQ4_0, true
	}
	return 0, false
}

// ValueType is the type tag of a metadata value.
type ValueType uint32

// The GGUF metadata value types.
const (
	ValueUint8   ValueType = 0
	ValueInt8    ValueType = 1
	ValueUint16  ValueType = 2
	ValueInt16   ValueType = 3
	ValueUint32  ValueType = 4
	ValueInt32   ValueType = 5
	ValueFloat32 ValueType = 6
	ValueBool    ValueType = 7
	ValueString  ValueType = 8
	ValueArray   ValueType = 9
	ValueUint64  ValueType = 10
	ValueInt64   ValueType = 11
	ValueFloat64 ValueType = 12
)

var valueTypeNames = [...]string{
	"u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "string", "array", "u64", "i64", "f64",
}

// String returns the short name of v ("u8", "string", "array", ...).
func (v ValueType) String() string {
	if int(v) < len(valueTypeNames) {
		return valueTypeNames[v]
	}
	return fmt.Sprintf("value_type(%d)", uint32(v))
}

// minSize is the smallest number of bytes one value of type v occupies: the
// fixed size of a scalar, the length prefix of a string, the header of an
// array. It bounds element counts before anything is allocated.
func (v ValueType) minSize() int64 {
	switch v {
	case ValueUint8, ValueInt8, ValueBool:
		return 1
	case ValueUint16, ValueInt16:
		return 2
	case ValueUint32, ValueInt32, ValueFloat32:
		return 4
	case ValueUint64, ValueInt64, ValueFloat64, ValueString:
		return 8
	case ValueArray:
		return 12
	}
	return 0
}
