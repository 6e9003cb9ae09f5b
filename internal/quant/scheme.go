package quant

import (
	"fmt"
	"slices"
)

// Kind names a weight quantization scheme as recipes spell it.
type Kind string

// The weight schemes.
const (
	KindLPBQ Kind = "lpbq" // LPBQ W4, block-wise expansion (lpbq.go)
	KindW8   Kind = "w8"   // int8 per output channel, symmetric (w8.go)
	KindQ4   Kind = "q4"   // group-wise 4-bit, symmetric or asymmetric (q4.go)
	KindF16  Kind = "f16"  // IEEE binary16, no quantization (f16.go)
	KindQ6K  Kind = "q6k"  // 6-bit in ggml's Q6_K super-blocks (q6k.go)
)

// LPBQMode selects how LPBQ computes its int4 values once the scales are fixed.
type LPBQMode string

// The LPBQ modes. The empty mode means LPBQRefined.
const (
	// LPBQRefined rounds each weight against the effective block scale k*S
	// that dequantization uses, so every int4 value is the nearest grid point.
	LPBQRefined LPBQMode = "refined"
	// LPBQReference rounds each weight against the unrounded block scale
	// s = max|w|/7, bit-exact with the published rule.
	LPBQReference LPBQMode = "reference"
)

// BlockSizes are the LPBQ block sizes and q4 group sizes a recipe may use.
var BlockSizes = []int{16, 32, 64, 128}

// Default block sizes when a recipe leaves them out.
const (
	DefaultLPBQBlock = 32
	DefaultQ4Group   = 32
)

// Scheme is the quantization of one weight tensor.
type Scheme struct {
	Kind Kind
	// Block is the LPBQ block size B or the q4 group size G along K; 0 for w8
	// and f16.
	Block int
	// Sym selects symmetric q4 (values -8..7, no zero point) rather than
	// min/max with a zero point (0..15). LPBQ and w8 are always symmetric.
	Sym bool
	// HQQ refines q4 parameters with half-quadratic optimization (hqq.go).
	HQQ bool
	// Mode is the LPBQ mode; empty means LPBQRefined.
	Mode LPBQMode
}

// String returns a short description such as "lpbq/b32/refined" or "q4/g32/sym/hqq".
func (s Scheme) String() string {
	switch s.Kind {
	case KindLPBQ:
		m := s.Mode
		if m == "" {
			m = LPBQRefined
		}
		return fmt.Sprintf("lpbq/b%d/%s", s.Block, m)
	case KindQ4:
		out := fmt.Sprintf("q4/g%d/", s.Block)
		if s.Sym {
			out += "sym"
		} else {
			out += "asym"
		}
		if s.HQQ {
			out += "/hqq"
		}
		return out
	}
	return string(s.Kind)
}

// Validate checks that s is a scheme this package can apply. The error is a
// *RecipeError whose Field names the offending scheme field ("scheme",
// "block", "mode", "sym", "hqq").
func (s Scheme) Validate() error {
	bad := func(field, format string, args ...any) error {
		return &RecipeError{Field: field, Msg: fmt.Sprintf(format, args...)}
	}
	switch s.Kind {
	case KindLPBQ, KindQ4:
		if !slices.Contains(BlockSizes, s.Block) {
			return bad("block", "%s block size %d is not one of %v", s.Kind, s.Block, BlockSizes)
		}
	case KindW8, KindF16, KindQ6K:
		if s.Block != 0 {
			return bad("block", "%s takes no block size (got %d)", s.Kind, s.Block)
		}
	case "":
		return bad("scheme", "missing scheme")
	default:
		return bad("scheme", "unknown scheme %q (want lpbq, w8, q4, q6k or f16)", string(s.Kind))
	}
	if s.Kind != KindLPBQ && s.Mode != "" {
		return bad("mode", "mode applies to lpbq only, not %s", s.Kind)
	}
	if s.Kind == KindLPBQ && s.Mode != "" && s.Mode != LPBQRefined && s.Mode != LPBQReference {
		return bad("mode", "unknown lpbq mode %q (want refined or reference)", string(s.Mode))
	}
	if s.Kind != KindQ4 && s.HQQ {
		return bad("hqq", "hqq applies to q4 only, not %s", s.Kind)
	}
	return nil
}

// BlockDivides reports whether block divides cols, that is whether a weight
// with cols inputs splits into whole blocks. When it does not, QuantizeLPBQ
// and QuantizeQ4 pad the last block (and say so in Quantized.Padded); a caller
// that wants no padded block can choose W8 for that tensor instead.
func BlockDivides(cols, block int) bool {
	return block > 0 && cols%block == 0
}

// Quantize quantizes the row-major weight w [rows, cols] with scheme s.
func Quantize(w []float32, rows, cols int, s Scheme) (*Quantized, error) {
	if err := s.Validate(); err != nil {
		return nil, fmt.Errorf("quant: scheme %v: %w", s, err)
	}
	switch s.Kind {
	case KindLPBQ:
		return QuantizeLPBQ(w, rows, cols, s.Block, s.Mode)
	case KindW8:
		return QuantizeW8(w, rows, cols)
	case KindQ4:
		return QuantizeQ4(w, rows, cols, Q4Options{Group: s.Block, Sym: s.Sym, HQQ: s.HQQ})
	case KindQ6K:
		return QuantizeQ6K(w, rows, cols)
	default: // KindF16; Validate rejected everything else
		return QuantizeF16(w, rows, cols)
	}
}
