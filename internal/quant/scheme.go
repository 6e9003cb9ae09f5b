package quant

import (
	"fmt"
	"slices"
	"strings"
)

// Kind names a weight quantization scheme as recipes spell it. Each kind
// is declared, with its entry in the scheme table, in the file named for
// it (lpbq.go, w8.go, q4.go, q4k.go, q6k.go, f16.go).
type Kind string

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
	// Block is the LPBQ block size B or the q4 (and q4k) group size G
	// along K; 0 for w8, q6k and f16.
	Block int
	// Sym selects symmetric q4 (values -8..7, no zero point) rather than
	// min/max with a zero point (0..15). LPBQ and w8 are always symmetric.
	Sym bool
	// HQQ refines q4 parameters with half-quadratic optimization (hqq.go).
	HQQ bool
	// Mode is the LPBQ mode; empty means LPBQRefined.
	Mode LPBQMode
	// FloatInput keeps the weight's input in float32 when the model is
	// compiled for int8 activations: the weight stays in its unpacked
	// layout and the engine multiplies it with float32 activations (W8A16
	// for a w8 weight). It is for the few linears whose inputs int8
	// rounding hurts most.
	FloatInput bool
}

// SchemeInfo is one weight scheme's entry in the scheme table: its name,
// cost and layout, and its reference rule. Every layer that handles
// quantized weights keys its own table on Kind (plan: the layout;
// compile: GGUF conversion and packing; engine: the kernel binding), so
// adding a scheme adds one file per layer.
type SchemeInfo struct {
	Kind Kind
	// Rule is the dequantization formula in one line.
	Rule string
	// Bits is the cost in bits per weight of the scheme's packed artifact
	// layout at its default block, row scales not counted.
	Bits float64
	// Blocks are the block (group) sizes a recipe may choose; nil for a
	// scheme without blocks, which then takes Block 0. DefaultBlock is
	// the one a recipe that names none gets (and the fixed group of a
	// scheme that has one, such as q4k).
	Blocks       []int
	DefaultBlock int
	// Group reports that recipes call the block size "group".
	Group bool
	// Super is the number of inputs of a super-block, which a row must
	// hold a whole number of (0: any width).
	Super int
	// Layout is the artifact layout tag the weights take when packed
	// (plan.WeightLayout).
	Layout string
	// BlockPacked reports that the packed layout is the plain one in
	// blocks of 32 inputs (the "-p" of w8, lpbq, q4), which a weight
	// takes when its width and block size are multiples of 32.
	BlockPacked bool
	// GGML is the ggml block type stored as it is in this scheme, "" none.
	GGML string
	// Recipe reports whether recipes may choose the scheme; q4k, for one,
	// is kept from GGUF files.
	Recipe bool
	// Tolerance bounds the relative L2 error ||w - w'|| / ||w|| of a
	// quantize-dequantize round trip of standard normal weights.
	Tolerance float64

	// check validates the scheme's own fields (mode, hqq) once the block
	// size has been checked.
	check func(s Scheme) error
	// name describes a scheme of this kind (Scheme.String).
	name func(s Scheme) string
	// recipe fills the fields a recipe left out and refuses a sym the
	// scheme does not take (nil: sym refused, no defaults).
	recipe func(s *Scheme, mode *string, sym *bool) error
	// json adds the scheme's fields to its written recipe form.
	json func(s Scheme, m map[string]any)
	// quantize is the reference quantizer (s already valid).
	quantize func(w []float32, rows, cols int, s Scheme) (*Quantized, error)
	// dequantizeRow writes row r of q's weights into row [K].
	dequantizeRow func(q *Quantized, r int, row []float32)
	// bits is the storage cost of q (Quantized.BitsPerWeight).
	bits func(q *Quantized) float64

	// The optimizers' hooks, nil for a scheme they leave as it is.
	// levels is the range of the integers of a scheme's weights; round
	// sets the integer of weight (r, c) to the point of [lo, hi] nearest
	// w, the parameters held, and returns the value it dequantizes to
	// (GPTQ, SearchGrid, RefitScales work on schemes with one).
	levels func(s Scheme) (lo, hi int)
	round  func(q *Quantized, r, c int, w float64, lo, hi int) float64
	// search chooses the grid again block by block (SearchGrid);
	// blockErr rounds columns [lo, hi) of row r and returns their
	// weighted error.
	search func(q *Quantized, blockErr func(r, lo, hi int) float64)
	// refit fits row r's scales (and codes) with its integers held
	// (RefitScales).
	refit func(rf *refitter, r int, w []float32)
}

// schemes is the scheme table, filled by each scheme's file.
var schemes = map[Kind]*SchemeInfo{}

// register adds a scheme's entry; a second entry for a kind is a bug.
func register(s *SchemeInfo) {
	if _, dup := schemes[s.Kind]; dup {
		panic(fmt.Sprintf("quant: scheme %q registered twice", s.Kind))
	}
	schemes[s.Kind] = s
}

// Lookup returns the table entry of kind k.
func Lookup(k Kind) (*SchemeInfo, bool) {
	s, ok := schemes[k]
	return s, ok
}

// Schemes returns the entries of every scheme, sorted by kind.
func Schemes() []*SchemeInfo {
	out := make([]*SchemeInfo, 0, len(schemes))
	for _, s := range schemes {
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b *SchemeInfo) int { return strings.Compare(string(a.Kind), string(b.Kind)) })
	return out
}

// Missing names the first part of s's entry left unset, "" when every
// part is there.
func (s *SchemeInfo) Missing() string {
	switch {
	case s.Rule == "" || s.Bits <= 0 || s.Layout == "" || s.Tolerance <= 0:
		return "a descriptor field"
	case s.check == nil:
		return "check"
	case s.name == nil:
		return "name"
	case s.json == nil:
		return "json"
	case s.quantize == nil:
		return "quantize"
	case s.dequantizeRow == nil:
		return "dequantizeRow"
	case s.bits == nil:
		return "bits"
	case (s.round == nil) != (s.levels == nil) || (s.round != nil && s.refit == nil):
		return "levels, round and refit together"
	}
	return ""
}

// recipeKinds lists the kinds recipes may choose, for error messages.
func recipeKinds() string {
	var names []string
	for _, s := range Schemes() {
		if s.Recipe {
			names = append(names, string(s.Kind))
		}
	}
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// String returns a short description such as "lpbq/b32/refined" or "q4/g32/sym/hqq".
func (s Scheme) String() string {
	name := string(s.Kind)
	if info, ok := schemes[s.Kind]; ok {
		name = info.name(s)
	}
	if s.FloatInput {
		name += "/float-in"
	}
	return name
}

// Validate checks that s is a scheme a recipe can choose. The error is a
// *RecipeError whose Field names the offending scheme field ("scheme",
// "block", "mode", "sym", "hqq").
func (s Scheme) Validate() error {
	if err := s.valid(); err != nil {
		return err
	}
	if !schemes[s.Kind].Recipe {
		return &RecipeError{Field: "scheme", Msg: fmt.Sprintf("%s is kept from %s blocks of GGUF files; recipes cannot choose it", s.Kind, schemes[s.Kind].GGML)}
	}
	return nil
}

// valid checks that s is a scheme this package can apply.
func (s Scheme) valid() error {
	info, ok := schemes[s.Kind]
	switch {
	case s.Kind == "":
		return &RecipeError{Field: "scheme", Msg: "missing scheme"}
	case !ok:
		return &RecipeError{Field: "scheme", Msg: fmt.Sprintf("unknown scheme %q (want %s)", string(s.Kind), recipeKinds())}
	case info.Blocks != nil && !slices.Contains(info.Blocks, s.Block):
		return &RecipeError{Field: "block", Msg: fmt.Sprintf("%s block size %d is not one of %v", s.Kind, s.Block, info.Blocks)}
	case info.Blocks == nil && s.Block != info.DefaultBlock:
		if info.DefaultBlock != 0 {
			return &RecipeError{Field: "block", Msg: fmt.Sprintf("%s has groups of %d (got %d)", s.Kind, info.DefaultBlock, s.Block)}
		}
		return &RecipeError{Field: "block", Msg: fmt.Sprintf("%s takes no block size (got %d)", s.Kind, s.Block)}
	}
	return info.check(s)
}

// noModeNoHQQ is the check of a scheme with neither a mode nor HQQ.
func noModeNoHQQ(s Scheme) error {
	if s.Mode != "" {
		return &RecipeError{Field: "mode", Msg: fmt.Sprintf("mode applies to lpbq only, not %s", s.Kind)}
	}
	return noHQQ(s)
}

// noHQQ refuses HQQ on a scheme other than q4.
func noHQQ(s Scheme) error {
	if s.HQQ {
		return &RecipeError{Field: "hqq", Msg: fmt.Sprintf("hqq applies to q4 only, not %s", s.Kind)}
	}
	return nil
}

// kindName is the name of a scheme without parameters.
func kindName(s Scheme) string { return string(s.Kind) }

// noFields is the written form of a scheme without parameters.
func noFields(Scheme, map[string]any) {}

// BlockDivides reports whether block divides cols, that is whether a weight
// with cols inputs splits into whole blocks. When it does not, QuantizeLPBQ
// and QuantizeQ4 pad the last block (and say so in Quantized.Padded); a caller
// that wants no padded block can choose W8 for that tensor instead.
func BlockDivides(cols, block int) bool {
	return block > 0 && cols%block == 0
}

// Quantize quantizes the row-major weight w [rows, cols] with scheme s,
// by the reference quantizer of its table entry.
func Quantize(w []float32, rows, cols int, s Scheme) (*Quantized, error) {
	if err := s.valid(); err != nil {
		return nil, fmt.Errorf("quant: scheme %v: %w", s, err)
	}
	return schemes[s.Kind].quantize(w, rows, cols, s)
}

// FitWidth returns the scheme a weight of cols inputs is stored in under
// s: s itself, or W8 when s is made of super-blocks that do not divide
// cols (the rule quantize applies and reports as a fallback).
func FitWidth(s Scheme, cols int) Scheme {
	if info, ok := Lookup(s.Kind); ok && info.Super > 0 && cols%info.Super != 0 {
		return Scheme{Kind: KindW8}
	}
	return s
}
