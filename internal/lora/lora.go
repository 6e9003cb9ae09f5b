package lora

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// Pair is the low-rank update of one linear weight W [Out, In]:
// W' = W + Scale·B·A, or with DoRA W' = Magnitude ⊙ (W + Scale·B·A) /
// ‖W + Scale·B·A‖, the norm taken over each output row.
type Pair struct {
	Rank, In, Out int
	A             []float32 // [Rank, In]
	B             []float32 // [Out, Rank]
	// Scale is alpha/rank (alpha/√rank with rsLoRA), before the scale
	// the adapter is applied with.
	Scale float32
	// Magnitude is DoRA's per-output-row magnitude; nil for plain LoRA.
	Magnitude []float32
}

// Adapter is an adapter as read from its files: its pairs under the
// names of its format (PEFT module paths or GGUF tensor names), not yet
// tied to a model.
type Adapter struct {
	// Path is the folder or file it was read from; Format "peft" or
	// "gguf".
	Path, Format string
	// Arch is the GGUF adapter's general.architecture, or the PEFT
	// folder's base_model_name_or_path ("" when absent).
	Arch string
	// Rank and Alpha are the adapter's default rank and alpha (per-module
	// patterns may differ); RSLoRA and DoRA tell how it scales.
	Rank        int
	Alpha       float64
	RSLoRA      bool
	DoRA        bool
	TargetNames []string // target_modules as declared
	// Pairs are keyed by the weight's name in the adapter's format:
	// "model.layers.0.self_attn.q_proj.weight" (PEFT) or
	// "blk.0.attn_q.weight" (GGUF).
	Pairs map[string]*Pair
}

// Spec is an adapter named on a command line: DIR[:SCALE] or
// FILE.gguf[:SCALE].
type Spec struct {
	Path  string
	Scale float64
}

// ParseSpec reads DIR[:SCALE]; the scale defaults to 1. A colon whose
// tail is not a number is part of the path.
func ParseSpec(s string) (Spec, error) {
	if s == "" {
		return Spec{}, errors.New("lora: empty adapter path")
	}
	sp := Spec{Path: s, Scale: 1}
	if i := strings.LastIndexByte(s, ':'); i > 0 {
		if v, err := strconv.ParseFloat(s[i+1:], 64); err == nil {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return Spec{}, fmt.Errorf("lora: %q: scale %v is not a finite number", s, v)
			}
			sp.Path, sp.Scale = s[:i], v
		}
	}
	return sp, nil
}

// Read reads the adapter at path: a PEFT folder (or its
// adapter_config.json) or a GGUF adapter file.
func Read(path string) (*Adapter, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("lora: %w", err)
	}
	if st.IsDir() {
		return ReadPEFT(path)
	}
	if filepath.Base(path) == ConfigName {
		return ReadPEFT(filepath.Dir(path))
	}
	return ReadGGUF(path)
}

// Names returns the adapter's weight names in sorted order.
func (a *Adapter) Names() []string {
	names := make([]string, 0, len(a.Pairs))
	for n := range a.Pairs {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// check validates a pair's shapes and values.
func (p *Pair) check(name string) error {
	if p.Rank <= 0 || p.In <= 0 || p.Out <= 0 {
		return fmt.Errorf("lora: %s: rank %d, in %d, out %d", name, p.Rank, p.In, p.Out)
	}
	if len(p.A) != p.Rank*p.In || len(p.B) != p.Out*p.Rank {
		return fmt.Errorf("lora: %s: A holds %d values and B %d, want %d and %d", name, len(p.A), len(p.B), p.Rank*p.In, p.Out*p.Rank)
	}
	if p.Magnitude != nil && len(p.Magnitude) != p.Out {
		return fmt.Errorf("lora: %s: DoRA magnitude holds %d values, want %d", name, len(p.Magnitude), p.Out)
	}
	if f := float64(p.Scale); math.IsNaN(f) || math.IsInf(f, 0) {
		return fmt.Errorf("lora: %s: scale %v is not finite", name, p.Scale)
	}
	for _, vs := range [][]float32{p.A, p.B, p.Magnitude} {
		for i, v := range vs {
			if f := float64(v); math.IsNaN(f) || math.IsInf(f, 0) {
				return fmt.Errorf("lora: %s holds %v at index %d", name, v, i)
			}
		}
	}
	return nil
}

// Merge returns w [Out, In] with the pair folded in at scale (the
// adapter's own Scale times scale); w is updated in place.
func (p *Pair) Merge(w []float32, scale float64) error {
	if len(w) != p.Out*p.In {
		return fmt.Errorf("lora: weight holds %d values, the adapter's pair is %dx%d", len(w), p.Out, p.In)
	}
	s := float64(p.Scale) * scale
	col := make([]float64, p.In)
	for o := 0; o < p.Out; o++ {
		clear(col)
		b := p.B[o*p.Rank : (o+1)*p.Rank]
		for r, bv := range b {
			if bv == 0 {
				continue
			}
			f := float64(bv)
			a := p.A[r*p.In : (r+1)*p.In]
			for i, av := range a {
				col[i] += f * float64(av)
			}
		}
		row := w[o*p.In : (o+1)*p.In]
		var norm float64
		for i := range row {
			v := float64(row[i]) + s*col[i]
			row[i] = float32(v)
			norm += v * v
		}
		if p.Magnitude != nil {
			// DoRA: the merged row rescaled to its magnitude
			norm = math.Sqrt(norm)
			if norm == 0 {
				return fmt.Errorf("lora: DoRA: merged row %d has norm 0", o)
			}
			k := float64(p.Magnitude[o]) / norm
			for i := range row {
				row[i] = float32(float64(row[i]) * k)
			}
		}
	}
	return nil
}
