package lora

import (
	"fmt"
	"strings"

	"github.com/aotlm/aotlm/internal/format"
	"github.com/aotlm/aotlm/internal/format/gguf"
	"github.com/aotlm/aotlm/internal/tensor"
)

// The metadata and tensor name suffixes of llama.cpp's LoRA adapters.
const (
	ggufType  = "adapter"
	ggufKind  = "lora"
	ggufAlpha = "adapter.lora.alpha"
	suffixA   = ".lora_a"
	suffixB   = ".lora_b"
)

// ReadGGUF reads llama.cpp's GGUF LoRA adapter at path: general.type
// "adapter", adapter.type "lora", adapter.lora.alpha, and for each
// adapted weight W the tensors W.lora_a [rank, in] and W.lora_b [out,
// rank]. The scale is alpha/rank, or 1 when alpha is 0, as llama.cpp
// applies it.
func ReadGGUF(path string) (*Adapter, error) {
	f, err := gguf.Open(path)
	if err != nil {
		return nil, fmt.Errorf("lora: %w", err)
	}
	defer f.Close()
	meta := f.Metadata()
	if t, _ := format.MetaString(meta, "general.type"); t != ggufType {
		return nil, fmt.Errorf("lora: %s: general.type is %q, want %q (is this an adapter?)", path, t, ggufType)
	}
	if t, _ := format.MetaString(meta, "adapter.type"); t != ggufKind {
		return nil, fmt.Errorf("lora: %s: adapter.type is %q, want %q", path, t, ggufKind)
	}
	alpha, _ := format.MetaFloat(meta, ggufAlpha)
	a := &Adapter{Path: path, Format: "gguf", Alpha: alpha, Pairs: map[string]*Pair{}}
	a.Arch, _ = format.MetaString(meta, "general.architecture")
	shapes := map[string][]int64{}
	for _, t := range f.Tensors() {
		shapes[t.Name] = t.Shape
	}
	for _, t := range f.Tensors() {
		var base string
		switch {
		case strings.HasSuffix(t.Name, suffixA):
			base = strings.TrimSuffix(t.Name, suffixA)
		case strings.HasSuffix(t.Name, suffixB):
			base = strings.TrimSuffix(t.Name, suffixB)
			if _, ok := shapes[base+suffixA]; !ok {
				return nil, fmt.Errorf("lora: %s: %s has no %s", path, t.Name, base+suffixA)
			}
			continue
		default:
			return nil, fmt.Errorf("lora: %s: tensor %q is neither a .lora_a nor a .lora_b matrix", path, t.Name)
		}
		sa := shapes[base+suffixA]
		sb, ok := shapes[base+suffixB]
		if !ok {
			return nil, fmt.Errorf("lora: %s: %s has no %s", path, t.Name, base+suffixB)
		}
		if len(sa) != 2 || len(sb) != 2 || sa[0] != sb[1] {
			return nil, fmt.Errorf("lora: %s: %s: lora_a %v and lora_b %v are not [rank, in] and [out, rank]", path, base, sa, sb)
		}
		p := &Pair{Rank: int(sa[0]), In: int(sa[1]), Out: int(sb[0]), Scale: 1}
		if alpha != 0 {
			p.Scale = float32(alpha / float64(p.Rank))
		}
		if p.A, err = f.ReadFloat32(base + suffixA); err != nil {
			return nil, fmt.Errorf("lora: %s: %w", path, err)
		}
		if p.B, err = f.ReadFloat32(base + suffixB); err != nil {
			return nil, fmt.Errorf("lora: %s: %w", path, err)
		}
		if err := p.check(base); err != nil {
			return nil, fmt.Errorf("%w (in %s)", err, path)
		}
		a.Pairs[base] = p
		a.Rank = max(a.Rank, p.Rank)
	}
	if len(a.Pairs) == 0 {
		return nil, fmt.Errorf("lora: %s holds no LoRA matrices", path)
	}
	return a, nil
}

// WriteGGUF writes pairs, keyed by GGUF weight name, as llama.cpp's GGUF
// LoRA adapter for architecture arch with the given alpha, in float32 (or
// float16 when half), through a temporary file renamed over path. Every
// pair must have the same alpha/rank scale (the format stores one alpha):
// rank r and alpha = Scale·r.
func WriteGGUF(path, arch string, alpha float32, pairs map[string]*Pair, half bool) (err error) {
	kv := []gguf.KV{
		{Key: "general.architecture", Value: arch},
		{Key: "general.type", Value: ggufType},
		{Key: "adapter.type", Value: ggufKind},
		{Key: ggufAlpha, Value: alpha},
	}
	dt := tensor.F32
	if half {
		dt = tensor.F16
	}
	var ts []gguf.WriteTensor
	for _, name := range (&Adapter{Pairs: pairs}).Names() {
		p := pairs[name]
		if err := p.check(name); err != nil {
			return err
		}
		ts = append(ts,
			gguf.WriteTensor{Name: name + suffixA, DType: dt, Shape: []int64{int64(p.Rank), int64(p.In)}, Values: p.A},
			gguf.WriteTensor{Name: name + suffixB, DType: dt, Shape: []int64{int64(p.Out), int64(p.Rank)}, Values: p.B})
	}
	if err := gguf.WriteFile(path, kv, ts); err != nil {
		return fmt.Errorf("lora: %w", err)
	}
	return nil
}
