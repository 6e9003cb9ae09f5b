package safetensors

import "github.com/aotlm/aotlm/internal/tensor"

// dtypeSpec describes one safetensors dtype name.
type dtypeSpec struct {
	size  int64        // bytes per element
	dtype tensor.DType // tensor.Invalid when aotlm has no matching type
	// readable is true when ReadFloat32 converts it.
	readable bool
}

// dtypes lists the safetensors dtype names this package accepts.
var dtypes = map[string]dtypeSpec{
	"F32":     {4, tensor.F32, true},
	"F16":     {2, tensor.F16, true},
	"BF16":    {2, tensor.BF16, true},
	"F64":     {8, tensor.F64, true},
	"I8":      {1, tensor.I8, false},
	"U8":      {1, tensor.U8, false},
	"I16":     {2, tensor.I16, false},
	"I32":     {4, tensor.I32, false},
	"I64":     {8, tensor.I64, false},
	"BOOL":    {1, tensor.Invalid, false},
	"U16":     {2, tensor.Invalid, false},
	"U32":     {4, tensor.Invalid, false},
	"U64":     {8, tensor.Invalid, false},
	"C64":     {8, tensor.Invalid, false},
	"F8_E4M3": {1, tensor.Invalid, false},
	"F8_E5M2": {1, tensor.Invalid, false},
	"F8_E8M0": {1, tensor.Invalid, false},
}

// dtypeName returns the safetensors name of d, or "" when d has none.
func dtypeName(d tensor.DType) string {
	switch d {
	case tensor.F32:
		return "F32"
	case tensor.F16:
		return "F16"
	case tensor.BF16:
		return "BF16"
	case tensor.F64:
		return "F64"
	case tensor.I8:
		return "I8"
	case tensor.U8:
		return "U8"
	case tensor.I16:
		return "I16"
	case tensor.I32:
		return "I32"
	case tensor.I64:
		return "I64"
	}
	return ""
}
