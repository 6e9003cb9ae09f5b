package plan

import (
	"fmt"
	"strconv"
	"strings"
)

// LayoutKind is the family of a quantized weight layout.
type LayoutKind uint8

// The quantized weight layouts; LayoutPlain is row-major float32.
const (
	LayoutPlain LayoutKind = iota
	LayoutW8               // "w8-rows"
	LayoutLPBQ             // "lpbq-bB"
	LayoutQ4               // "q4-gG-sym", "q4-gG-asym"
)

// WeightLayout is a parsed layout tag of the artifact's tensor index. A
// quantized weight W [N, K] is one tensor of dtype i8 and shape [N, K]
// whose bytes are consecutive parts, each starting at a multiple of 4
// bytes from the tensor's start (zero padding between):
//
//	w8-rows     q i8 [N*K] | s f32 [N]
//	            w[n][k] = float32(q[n*K+k]) * s[n]
//	lpbq-bB     q i8 [N*K] | codes u8 [N*nb] | S f32 [N]     nb = ceil(K/B)
//	            w[n][k] = float32(int32(q[n*K+k]) * int32(codes[n*nb+k/B])) * S[n]
//	q4-gG-sym   q i8 [N*K] | s f32 [N*ng]                     ng = ceil(K/G)
//	            w[n][k] = float32(q[n*K+k]) * s[n*ng+k/G]
//	q4-gG-asym  q i8 [N*K] | s f32 [N*ng] | z f32 [N*ng]
//	            w[n][k] = (float32(q[n*K+k]) - z[n*ng+k/G]) * s[n*ng+k/G]
//
// The integers are stored one per byte (4-bit values are not packed in
// this version); the formulas are those of the quant package, so a kernel
// that dequantizes in the loop computes with exactly the float32 weights
// the quantized model folder stands for.
type WeightLayout struct {
	Kind  LayoutKind
	Block int  // B or G; 0 for w8
	Sym   bool // q4 only
}

// MaxLayoutBlock bounds B and G.
const MaxLayoutBlock = 1 << 12

// ParseLayout parses a layout tag; "" is LayoutPlain.
func ParseLayout(tag string) (WeightLayout, error) {
	block := func(s, prefix string) (int, error) {
		b, err := strconv.Atoi(strings.TrimPrefix(s, prefix))
		if err != nil || !strings.HasPrefix(s, prefix) || b < 1 || b > MaxLayoutBlock {
			return 0, fmt.Errorf("layout %q: bad block size", tag)
		}
		return b, nil
	}
	switch {
	case tag == "":
		return WeightLayout{}, nil
	case tag == "w8-rows":
		return WeightLayout{Kind: LayoutW8}, nil
	case strings.HasPrefix(tag, "lpbq-"):
		b, err := block(strings.TrimPrefix(tag, "lpbq-"), "b")
		return canonical(tag, WeightLayout{Kind: LayoutLPBQ, Block: b}, err)
	case strings.HasPrefix(tag, "q4-"):
		f := strings.Split(tag, "-")
		if len(f) != 3 || (f[2] != "sym" && f[2] != "asym") {
			return WeightLayout{}, fmt.Errorf("layout %q: want q4-gG-sym or q4-gG-asym", tag)
		}
		b, err := block(f[1], "g")
		return canonical(tag, WeightLayout{Kind: LayoutQ4, Block: b, Sym: f[2] == "sym"}, err)
	}
	return WeightLayout{}, fmt.Errorf("layout %q is not known", tag)
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
	switch l.Kind {
	case LayoutW8:
		return "w8-rows"
	case LayoutLPBQ:
		return fmt.Sprintf("lpbq-b%d", l.Block)
	case LayoutQ4:
		if l.Sym {
			return fmt.Sprintf("q4-g%d-sym", l.Block)
		}
		return fmt.Sprintf("q4-g%d-asym", l.Block)
	}
	return ""
}

// Parts are the byte offsets of a quantized tensor's parts from its start
// and its total size; an absent part has offset -1.
type Parts struct {
	Codes, Scales, Zeros int64
	NScales              int64 // float32 scales (and zeros)
	Size                 int64
}

func align4(n int64) int64 { return (n + 3) &^ 3 }

// Parts returns where the parts of an [n, k] weight lie, or an error when
// the shape is not positive or too large.
func (l WeightLayout) Parts(n, k int64) (Parts, error) {
	if n < 1 || k < 1 || n > MaxCols || k > MaxCols || n*k > 1<<40 {
		return Parts{}, fmt.Errorf("layout %s: bad shape [%d, %d]", l.Tag(), n, k)
	}
	p := Parts{Codes: -1, Zeros: -1}
	nb := int64(0)
	if l.Block > 0 {
		nb = (k + int64(l.Block) - 1) / int64(l.Block)
	}
	off := n * k
	switch l.Kind {
	case LayoutW8:
		p.NScales = n
	case LayoutLPBQ:
		p.Codes, off = off, off+n*nb
		p.NScales = n
	case LayoutQ4:
		p.NScales = n * nb
	default:
		return Parts{}, fmt.Errorf("layout %q has no parts", l.Tag())
	}
	p.Scales = align4(off)
	off = p.Scales + 4*p.NScales
	if l.Kind == LayoutQ4 && !l.Sym {
		p.Zeros, off = off, off+4*p.NScales
	}
	p.Size = off
	return p, nil
}
