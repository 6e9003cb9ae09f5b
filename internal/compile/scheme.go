package compile

import (
	"fmt"

	"github.com/aotlm/aotlm/internal/format/gguf"
	"github.com/aotlm/aotlm/internal/plan"
	"github.com/aotlm/aotlm/internal/quant"
)

// weightScheme is one weight scheme's entry in compile's table: the
// artifact layout its weights take, how they are laid out in it, and the
// ggml block types kept in the scheme when read from a GGUF file. Each
// scheme's entry is in the file named for it (scheme_q4k.go, ...).
type weightScheme struct {
	kind quant.Kind
	// layout chooses the layout of the quantized weight w of the given
	// shape (pack: the packed form where the shape allows it) and its
	// encoder; ok false stores the weight as float32.
	layout func(w Weight, shape []int64, pack bool) (l plan.WeightLayout, encode encoder, ok bool)
	// gguf are the ggml block types converted to the scheme exactly.
	gguf []ggufBlocks
}

// encoder lays the quantized weight q of the given shape out as l.
type encoder func(l plan.WeightLayout, q *quant.Quantized, shape []int64) ([]byte, error)

// ggufBlocks is a ggml block type kept in a scheme.
type ggufBlocks struct {
	typ gguf.GGMLType
	// scheme is how GGUFConversion names the result ("q4/g32/sym").
	scheme string
	// tablesOnly keeps the type only in the token embedding and the
	// classifier (ggufTable); elsewhere it becomes w8.
	tablesOnly bool
	// convert re-lays the blocks of a weight [rows, cols] (cols a
	// multiple of the block size and of 32).
	convert func(raw []byte, rows, cols int) (*quant.Quantized, error)
}

// weightSchemes is compile's scheme table; ggufKept indexes its GGUF
// conversions by block type.
var (
	weightSchemes = map[quant.Kind]*weightScheme{}
	ggufKept      = map[gguf.GGMLType]ggufBlocks{}
)

// registerScheme adds a scheme's entry; a second entry for a kind or a
// block type is a bug.
func registerScheme(ws *weightScheme) {
	if _, dup := weightSchemes[ws.kind]; dup {
		panic(fmt.Sprintf("compile: scheme %q registered twice", ws.kind))
	}
	weightSchemes[ws.kind] = ws
	for _, g := range ws.gguf {
		if _, dup := ggufKept[g.typ]; dup {
			panic(fmt.Sprintf("compile: ggml type %v kept by two schemes", g.typ))
		}
		ggufKept[g.typ] = g
	}
}

// blockLayout is the layout choice of the schemes stored as integers
// with per-row or per-block parameters (w8, lpbq, q4): l, packed where
// the shape allows it (with encodePacked), else as it is.
func blockLayout(l plan.WeightLayout, shape []int64, pack bool, encodePacked encoder) (plan.WeightLayout, encoder, bool) {
	if pack && len(shape) == 2 && l.CanPack(shape[1]) {
		l.Packed = true
		return l, encodePacked, true
	}
	return l, encodeQuantized, true
}
