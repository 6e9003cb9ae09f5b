package tensor

import "fmt"

// DType is the element type of a stored tensor.
type DType uint8

// The element types aotlm reads. Block-quantized types pack BlockSize values
// into BlockBytes bytes.
const (
	Invalid DType = iota
	F32
	F16
	BF16
	F64
	I8
	U8
	I16
	I32
	I64
	Q8_0 // ggml Q8_0: 32 values = f16 scale + 32 int8
	Q4_0 // ggml Q4_0: 32 values = f16 scale + 16 bytes of 4-bit codes (offset 8)
)

var dtypeInfo = [...]struct {
	name       string
	blockSize  int
	blockBytes int
}{
	Invalid: {"invalid", 1, 0},
	F32:     {"f32", 1, 4},
	F16:     {"f16", 1, 2},
	BF16:    {"bf16", 1, 2},
	F64:     {"f64", 1, 8},
	I8:      {"i8", 1, 1},
	U8:      {"u8", 1, 1},
	I16:     {"i16", 1, 2},
	I32:     {"i32", 1, 4},
	I64:     {"i64", 1, 8},
	Q8_0:    {"q8_0", 32, 34},
	Q4_0:    {"q4_0", 32, 18},
}

// String returns the lower-case name of d ("f32", "q4_0", ...).
func (d DType) String() string {
	if int(d) < len(dtypeInfo) {
		return dtypeInfo[d].name
	}
	return fmt.Sprintf("dtype(%d)", uint8(d))
}

// Valid reports whether d is a known element type.
func (d DType) Valid() bool { return d != Invalid && int(d) < len(dtypeInfo) }

// BlockSize is the number of values in one storage block (1 for plain types).
func (d DType) BlockSize() int {
	if !d.Valid() {
		return 0
	}
	return dtypeInfo[d].blockSize
}

// BlockBytes is the number of bytes of one storage block.
func (d DType) BlockBytes() int {
	if !d.Valid() {
		return 0
	}
	return dtypeInfo[d].blockBytes
}

// ByteSize returns the number of bytes n values of type d occupy, or an error
// when n is negative, not a whole number of blocks, or the size overflows int64.
func (d DType) ByteSize(n int64) (int64, error) {
	if !d.Valid() {
		return 0, fmt.Errorf("unknown dtype %v", d)
	}
	if n < 0 {
		return 0, fmt.Errorf("negative element count %d", n)
	}
	bs := int64(d.BlockSize())
	if n%bs != 0 {
		return 0, fmt.Errorf("%d elements is not a whole number of %v blocks of %d", n, d, bs)
	}
	blocks := n / bs
	bb := int64(d.BlockBytes())
	if blocks > (1<<62)/bb {
		return 0, fmt.Errorf("size of %d %v elements overflows", n, d)
	}
	return blocks * bb, nil
}

// NumElements returns the product of shape, or an error if a dimension is
// negative or the product overflows int64.
func NumElements(shape []int64) (int64, error) {
	n := int64(1)
	for _, d := range shape {
		if d < 0 {
			return 0, fmt.Errorf("negative dimension %d in shape %v", d, shape)
		}
		if d != 0 && n > (1<<62)/d {
			return 0, fmt.Errorf("shape %v overflows", shape)
		}
		n *= d
	}
	return n, nil
}
