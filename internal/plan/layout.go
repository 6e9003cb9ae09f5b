package plan

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// LayoutKind is the family of a quantized weight layout. Each family is
// declared, with its entry in the layout table, in the file named for it
// (layout_w8.go, layout_lpbq.go, layout_q4.go, layout_q4k.go,
// layout_q6k.go, layout_f16.go).
type LayoutKind uint8

// LayoutPlain is row-major float32, the layout of a tensor with no tag.
const LayoutPlain LayoutKind = 0

// WeightLayout is a parsed layout tag of the artifact's tensor index. A
// quantized weight W [N, K] is one tensor of dtype i8 and shape [N, K]
// whose bytes are consecutive parts, each starting at a multiple of 4
// bytes from the tensor's start (zero padding between); each family's
// file gives its parts and its dequantization rule, which is that of the
// quant package's scheme of the same name, so a kernel that dequantizes
// in the loop computes with exactly the float32 weights the quantized
// model folder stands for. The integers are stored one per byte.
//
// A tag ending in "-p" is the same weight packed for the int8-activation
// kernels (package kernel; K a multiple of 32, B and G multiples of 32),
// in blocks of 32 inputs whatever B or G was (nb32 = K/32): 4-bit codes
// are stored two to a byte, byte i of the 16 of block b in nib holding
// u[32b+i] in its low and u[32b+16+i] in its high nibble, and a block's
// code, scale and zero point are those of the B- or G-block it lies in.
// The packed weights stand for the same values up to the float32
// rounding of code*S. Some families (q4k, q6k) exist only packed, one
// (f16) only unpacked.
type WeightLayout struct {
	Kind   LayoutKind
	Block  int  // B or G; 0 for w8
	Sym    bool // q4 only
	Packed bool // the "-p" form
}

// forms are the forms a layout family has.
type forms uint8

const (
	bothForms    forms = iota // a plain form and a packed ("-p") one
	packedOnly                // its tag ends in "-p"
	unpackedOnly              // no packed form
)

// layoutInfo is one layout family's entry in the layout table.
type layoutInfo struct {
	kind LayoutKind
	// scheme is the quant scheme whose weights the family lays out.
	scheme string
	forms  forms
	// half: the tensor has dtype f16 (else i8).
	half bool
	// parse reads a tag of the family's base form (with its "-p" for a
	// packed-only family) and reports whether the tag is the family's.
	parse func(tag string) (WeightLayout, bool, error)
	// tag is the tag of l's base form.
	tag func(l WeightLayout) string
	// parts places the parts of an [n, k] weight (shape already checked).
	parts func(l WeightLayout, n, k int64) (Parts, error)
	// canPack reports whether a weight of k inputs has the packed form.
	canPack func(l WeightLayout, k int64) bool
}

// layouts is the layout table, filled by each family's file.
var layouts = map[LayoutKind]*layoutInfo{}

// registerLayout adds a family's entry; a second entry for a kind is a bug.
func registerLayout(e *layoutInfo) {
	if _, dup := layouts[e.kind]; dup || e.kind == LayoutPlain {
		panic(fmt.Sprintf("plan: layout kind %d registered twice", e.kind))
	}
	layouts[e.kind] = e
}

// LayoutKinds lists the registered layout families in kind order.
func LayoutKinds() []LayoutKind {
	out := make([]LayoutKind, 0, len(layouts))
	for k := range layouts {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// Scheme returns the name of the quant scheme whose weights the family
// lays out ("q4k"), "" for LayoutPlain.
func (k LayoutKind) Scheme() string {
	if e, ok := layouts[k]; ok {
		return e.scheme
	}
	return ""
}

// PackBlock is the block length of the packed layouts.
const PackBlock = 32

// CanPack reports whether a weight [n, k] of layout l has a packed form.
func (l WeightLayout) CanPack(k int64) bool {
	e, ok := layouts[l.Kind]
	return ok && e.forms != unpackedOnly && e.canPack(l, k)
}

// Half reports whether l is the binary16 layout, whose tensor has dtype
// f16 (the others have dtype i8).
func (l WeightLayout) Half() bool {
	e, ok := layouts[l.Kind]
	return ok && e.half
}

// MaxLayoutBlock bounds B and G.
const MaxLayoutBlock = 1 << 12

// ParseLayout parses a layout tag; "" is LayoutPlain.
func ParseLayout(tag string) (WeightLayout, error) {
	if tag == "" {
		return WeightLayout{}, nil
	}
	kinds := LayoutKinds()
	for _, k := range kinds {
		if e := layouts[k]; e.forms == packedOnly {
			if l, ok, err := e.parse(tag); ok {
				return l, err
			}
		}
	}
	if base, ok := strings.CutSuffix(tag, "-p"); ok && base != "" {
		l, err := ParseLayout(base)
		if err != nil {
			return WeightLayout{}, err
		}
		if e := layouts[l.Kind]; e != nil && e.forms == unpackedOnly {
			return WeightLayout{}, fmt.Errorf("layout %q: %s has no packed form", tag, base)
		}
		if l.Packed || l.Block%PackBlock != 0 {
			return WeightLayout{}, fmt.Errorf("layout %q: only blocks that are multiples of %d pack", tag, PackBlock)
		}
		l.Packed = true
		return l, nil
	}
	for _, k := range kinds {
		if e := layouts[k]; e.forms != packedOnly {
			if l, ok, err := e.parse(tag); ok {
				return l, err
			}
		}
	}
	return WeightLayout{}, fmt.Errorf("layout %q is not known", tag)
}

// parseBlock reads the block size of s, written prefix then the number.
func parseBlock(tag, s, prefix string) (int, error) {
	b, err := strconv.Atoi(strings.TrimPrefix(s, prefix))
	if err != nil || !strings.HasPrefix(s, prefix) || b < 1 || b > MaxLayoutBlock {
		return 0, fmt.Errorf("layout %q: bad block size", tag)
	}
	return b, nil
}

// canonical refuses spellings other than Tag's (a sign, leading zeros).
func canonical(tag string, l WeightLayout, err error) (WeightLayout, error) {
	if err == nil && l.Tag() != tag {
		err = fmt.Errorf("layout %q: write it %q", tag, l.Tag())
	}
	if err != nil {
		return WeightLayout{}, err
	}
	return l, nil
}

// Tag returns the layout's tag.
func (l WeightLayout) Tag() string {
	e, ok := layouts[l.Kind]
	if !ok {
		return ""
	}
	if l.Packed && e.forms != packedOnly {
		u := l
		u.Packed = false
		return e.tag(u) + "-p"
	}
	return e.tag(l)
}

// Parts are the byte offsets of a quantized tensor's parts from its start
// and its total size; an absent part has offset -1. In q6k-p, Codes is
// where hi starts, Sub where sub does and Scales where d does.
type Parts struct {
	Codes, Scales, Zeros int64
	Sub                  int64
	NScales              int64 // float32 scales (and zeros); q4k-p: the records' 4-byte words
	Size                 int64
}

func align4(n int64) int64 { return (n + 3) &^ 3 }

// Parts returns where the parts of an [n, k] weight lie, or an error when
// the shape is not positive or too large.
func (l WeightLayout) Parts(n, k int64) (Parts, error) {
	if n < 1 || k < 1 || n > MaxCols || k > MaxCols || n*k > 1<<40 {
		return Parts{}, fmt.Errorf("layout %s: bad shape [%d, %d]", l.Tag(), n, k)
	}
	e, ok := layouts[l.Kind]
	if !ok {
		return Parts{}, fmt.Errorf("layout %q has no parts", l.Tag())
	}
	return e.parts(l, n, k)
}

// blockParts are the parts of the families stored as integers with
// per-row or per-block parameters (w8, lpbq, q4): the integers, then the
// block codes (codes), nscales float32 scales and, with zeros, as many
// zero points. Packed, the integers are 4-bit (nibbles) or bytes and the
// blocks are PackBlock long.
func blockParts(l WeightLayout, n, k int64, codes, zeros, nibbles bool, nscales func(n, nb int64) int64) (Parts, error) {
	p := Parts{Codes: -1, Zeros: -1, Sub: -1}
	nb := int64(0)
	if l.Block > 0 {
		nb = (k + int64(l.Block) - 1) / int64(l.Block)
	}
	off := n * k
	if l.Packed {
		if !l.CanPack(k) {
			return Parts{}, fmt.Errorf("layout %s: %d inputs are not a multiple of %d", l.Tag(), k, PackBlock)
		}
		nb = k / PackBlock
		if nibbles {
			off = n * k / 2
		}
	}
	if codes {
		p.Codes, off = off, off+n*nb
	}
	p.NScales = nscales(n, nb)
	p.Scales = align4(off)
	off = p.Scales + 4*p.NScales
	if zeros {
		p.Zeros, off = off, off+4*p.NScales
	}
	p.Size = off
	return p, nil
}

// packsInBlocks is canPack of the block families: K a multiple of
// PackBlock, and B or G too.
func packsInBlocks(l WeightLayout, k int64) bool { return k%PackBlock == 0 && l.Block%PackBlock == 0 }
