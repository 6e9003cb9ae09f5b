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
	LayoutF16              // "f16-rows"
	LayoutQ4K              // "q4k-p" (packed only)
	LayoutQ6K              // "q6k-p" (packed only)
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
// A binary16 weight is a tensor of dtype f16 and shape [N, K] instead,
// with no parts besides its values:
//
//	f16-rows    h f16 [N*K]
//	            w[n][k] = float32(h[n*K+k])   (IEEE binary16, exact in float32)
//
// The integers are stored one per byte; the formulas are those of the
// quant package, so a kernel that dequantizes in the loop computes with
// exactly the float32 weights the quantized model folder stands for.
//
// A tag ending in "-p" is the same weight packed for the int8-activation
// kernels (package kernel; K a multiple of 32, B and G multiples of 32),
// in blocks of 32 inputs whatever B or G was (nb32 = K/32):
//
//	w8-rows-p      u u8 [N*K] = q+128 | s f32 [N]
//	lpbq-bB-p      nib [N*K/2] | codes u8 [N*nb32] | S f32 [N]
//	q4-gG-sym-p    nib [N*K/2] | s f32 [N*nb32]
//	q4-gG-asym-p   nib [N*K/2] | s f32 [N*nb32] | z f32 [N*nb32]
//
// where byte i of the 16 of block b in nib holds u[32b+i] in its low and
// u[32b+16+i] in its high nibble, u = q+8 (lpbq, sym) or q (asym), and a
// block's code, scale and zero point are those of the B- or G-block it
// lies in. The packed weights stand for the same values up to the float32
// rounding of code*S.
//
// One layout exists only packed: ggml's Q4_K super-blocks kept as they
// are (K a multiple of 256; nc = ceil(K/512) records of 16 blocks a row):
//
//	q4k-p    nib [N*K/2] | rec [N*nc][48]
//	         rec = sc u8 [16] | m u8 [16] | d0, dmin0, d1, dmin1 f32
//	         w = d*sc*u - dmin*m for the block's 6-bit sc and m and its
//	         super-block's (8 blocks: d0, dmin0 for blocks 0..7 of the
//	         record) d and dmin; a record past the row's last block holds
//	         zeros.
//
// It takes 4.75 bits a weight, where q4-g32-asym-p of the same weights
// takes 6 (package kernel, Q4.K4).
//
// So does ggml's Q6_K (quant.Q6K; K a multiple of 256), in planes:
//
//	q6k-p    nib [N*K/2] | hi [N*K/4] | sub i8 [N*K/16] | d f32 [N*K/256]
//	         w = float32(d*float32(sub)) * float32(u - 32) for the 6-bit
//	         code u of the input (kernel.PackQ6 gives where its low 4 and
//	         high 2 bits lie), its group of 16's sub and its super-block
//	         of 256's d.
//
// It takes 6.625 bits a weight (package kernel, Q6).
type WeightLayout struct {
	Kind   LayoutKind
	Block  int  // B or G; 0 for w8
	Sym    bool // q4 only
	Packed bool // the "-p" form
}

// PackBlock is the block length of the packed layouts.
const PackBlock = 32

// CanPack reports whether a weight [n, k] of layout l has a packed form.
func (l WeightLayout) CanPack(k int64) bool {
	if l.Kind == LayoutQ4K || l.Kind == LayoutQ6K {
		return k%Q4KSuper == 0
	}
	return l.Kind != LayoutPlain && l.Kind != LayoutF16 && k%PackBlock == 0 && l.Block%PackBlock == 0
}

// Q4KSuper is the number of inputs of a q4k-p super-block, of which a
// weight's row holds a whole number.
const Q4KSuper = 256

// q4kRecordBytes is the size of a q4k-p record of 16 blocks.
const q4kRecordBytes = 48

// Half reports whether l is the binary16 layout, whose tensor has dtype
// f16 (the others have dtype i8).
func (l WeightLayout) Half() bool { return l.Kind == LayoutF16 }

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
	if tag == "q4k-p" {
		return WeightLayout{Kind: LayoutQ4K, Block: PackBlock, Packed: true}, nil
	}
	if tag == "q6k-p" {
		return WeightLayout{Kind: LayoutQ6K, Packed: true}, nil
	}
	if base, ok := strings.CutSuffix(tag, "-p"); ok && base != "" {
		l, err := ParseLayout(base)
		if err != nil {
			return WeightLayout{}, err
		}
		if l.Kind == LayoutF16 {
			return WeightLayout{}, fmt.Errorf("layout %q: f16-rows has no packed form", tag)
		}
		if l.Packed || l.Block%PackBlock != 0 {
			return WeightLayout{}, fmt.Errorf("layout %q: only blocks that are multiples of %d pack", tag, PackBlock)
		}
		l.Packed = true
		return l, nil
	}
	switch {
	case tag == "":
		return WeightLayout{}, nil
	case tag == "w8-rows":
		return WeightLayout{Kind: LayoutW8}, nil
	case tag == "f16-rows":
		return WeightLayout{Kind: LayoutF16}, nil
	case tag == "q4k", tag == "q6k":
		return WeightLayout{}, fmt.Errorf("layout %q exists only packed (%s-p)", tag, tag)
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
	if l.Packed && l.Kind != LayoutQ4K && l.Kind != LayoutQ6K {
		u := l
		u.Packed = false
		return u.Tag() + "-p"
	}
	switch l.Kind {
	case LayoutW8:
		return "w8-rows"
	case LayoutF16:
		return "f16-rows"
	case LayoutQ4K:
		return "q4k-p" // packed only
	case LayoutQ6K:
		return "q6k-p" // packed only
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
	p := Parts{Codes: -1, Zeros: -1, Sub: -1}
	if l.Kind == LayoutF16 {
		if l.Packed || l.Block != 0 {
			return Parts{}, fmt.Errorf("layout %s: binary16 rows have no blocks and no packed form", l.Tag())
		}
		p.Scales, p.Size = -1, 2*n*k
		return p, nil
	}
	if l.Kind == LayoutQ4K {
		if !l.Packed || l.Block != PackBlock || k%Q4KSuper != 0 {
			return Parts{}, fmt.Errorf("layout %s: needs the packed form and inputs a multiple of %d (has %d)", l.Tag(), Q4KSuper, k)
		}
		nc := (k/PackBlock + 15) / 16
		p.Scales = n * k / 2 // a multiple of 128
		p.NScales = n * nc * q4kRecordBytes / 4
		p.Size = p.Scales + n*nc*q4kRecordBytes
		return p, nil
	}
	if l.Kind == LayoutQ6K {
		if !l.Packed || l.Block != 0 || k%Q4KSuper != 0 {
			return Parts{}, fmt.Errorf("layout %s: needs the packed form and inputs a multiple of %d (has %d)", l.Tag(), Q4KSuper, k)
		}
		p.Codes = n * k / 2
		p.Sub = p.Codes + n*k/4
		p.Scales = p.Sub + n*k/16 // a multiple of 16
		p.NScales = n * k / Q4KSuper
		p.Size = p.Scales + 4*p.NScales
		return p, nil
	}
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
		if l.Kind != LayoutW8 {
			off = n * k / 2
		}
	}
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
