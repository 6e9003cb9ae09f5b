package recipe

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/aotlm/aotlm/internal/arch"
	"github.com/aotlm/aotlm/internal/eval"
	"github.com/aotlm/aotlm/internal/graph"
	"github.com/aotlm/aotlm/internal/load"
	"github.com/aotlm/aotlm/internal/op"
	"github.com/aotlm/aotlm/internal/qdq"
	"github.com/aotlm/aotlm/internal/quant"
)

// Row is one linear weight's effect on the model when quantized alone.
type Row struct {
	Name   string  `json:"name"`
	Scheme string  `json:"scheme"`
	KL     float64 `json:"kl"`
	PPL    float64 `json:"ppl"`
	Top1   float64 `json:"top1"`
	Params int     `json:"params"`
	Bits   float64 `json:"bits_per_weight"` // at the recipe's scheme
	W8Bits float64 `json:"w8_bits_per_weight"`
}

// Sensitivity quantizes each linear weight of the float model at src
// alone with the recipe's scheme (the rest float) and measures the KL
// divergence of the result from the float model over the first chunks of
// text, most sensitive first.
func Sensitivity(src string, r quant.Recipe, text, tokPath string, ctx, chunks, threads int) ([]Row, float64, error) {
	m, err := load.Float(src)
	if err != nil {
		return nil, 0, err
	}
	if tokPath == "" {
		tokPath = src
	}
	tok, err := load.Tokenizer(tokPath, src)
	if err != nil {
		return nil, 0, err
	}
	g, err := arch.Build(&m.Config, arch.BuildOptions{})
	if err != nil {
		return nil, 0, err
	}
	var names []string
	for _, n := range g.Nodes {
		if n.Op == op.Linear && !slices.Contains(names, n.Weight) {
			names = append(names, n.Weight)
		}
	}
	ids, bos, err := eval.Tokenize(tok, text)
	if err != nil {
		return nil, 0, err
	}
	opts := eval.Options{Ctx: ctx, MaxChunks: chunks, BOS: bos}
	base, err := qdq.NewSession(m, ctx, threads, nil)
	if err != nil {
		return nil, 0, err
	}
	var rows []Row
	var basePPL float64
	for _, name := range names {
		w := m.Weights[name]
		cols := g.Weights[name][1]
		s := quant.FitWidth(r.SchemeFor(name), cols)
		q, err := quant.Quantize(w, len(w)/cols, cols, s)
		if err != nil {
			return nil, 0, fmt.Errorf("tensor %s: %w", name, err)
		}
		ws := make(graph.Weights, len(m.Weights))
		for k, v := range m.Weights {
			ws[k] = v
		}
		ws[name] = q.Dequantize()
		sess, err := qdq.NewSession(&arch.Model{Config: m.Config, Weights: ws}, ctx, threads, nil)
		if err != nil {
			return nil, 0, err
		}
		res, err := eval.PerplexityPhases([]eval.Session{base, sess}, ids, opts)
		if err != nil {
			return nil, 0, err
		}
		basePPL = res[0].PPL
		rows = append(rows, Row{Name: name, Scheme: s.String(), KL: res[1].KL, PPL: res[1].PPL, Top1: res[1].Top1, Params: len(w),
			Bits: q.BitsPerWeight(), W8Bits: 8 + 32/float64(cols)})
	}
	slices.SortStableFunc(rows, func(a, b Row) int {
		switch {
		case a.KL > b.KL:
			return -1
		case a.KL < b.KL:
			return 1
		}
		return 0
	})
	return rows, basePPL, nil
}

// ParseSize reads a --max-size: bits per weight ("5.5b", "5.5bpw") or bytes
// ("300000", "1.5MB", "2GB", decimal units) of all parameters.
func ParseSize(v string) (bits float64, bytes float64, err error) {
	s := strings.TrimSpace(strings.ToLower(v))
	for _, suf := range []string{"bpw", "b"} {
		if t, ok := strings.CutSuffix(s, suf); ok && !strings.HasSuffix(t, "m") && !strings.HasSuffix(t, "g") && !strings.HasSuffix(t, "k") {
			f, err := strconv.ParseFloat(t, 64)
			if err != nil || !(f > 0) {
				return 0, 0, fmt.Errorf("--max-size %q: want bits per weight such as 5.5b, or bytes such as 1.5MB", v)
			}
			return f, 0, nil
		}
	}
	mult := 1.0
	for _, u := range []struct {
		suf string
		m   float64
	}{{"kb", 1e3}, {"mb", 1e6}, {"gb", 1e9}} {
		if t, ok := strings.CutSuffix(s, u.suf); ok {
			s, mult = t, u.m
			break
		}
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || !(f > 0) {
		return 0, 0, fmt.Errorf("--max-size %q: want bits per weight such as 5.5b, or bytes such as 1.5MB", v)
	}
	return 0, f * mult, nil
}

// Auto keeps the most sensitive linears at W8, most sensitive first,
// while the model's estimated size stays within the budget (bits per
// weight over all parameters, or bytes). With perBit, "most sensitive"
// is the KL divergence divided by the bits W8 would add (a greedy
// knapsack), else the KL divergence alone. other is the size in bits of
// the parameters that are not linears (embeddings, norms), total the
// count of all parameters. It returns the recipe with the W8 overrides
// first, the estimated bits per weight and the linears kept at W8.
func Auto(r quant.Recipe, rows []Row, other float64, total int, maxBits, maxBytes float64, perBit bool) (quant.Recipe, float64, []string, error) {
	var size float64 = other
	for _, row := range rows {
		size += row.Bits * float64(row.Params)
	}
	budget := maxBits * float64(total)
	if maxBytes > 0 {
		budget = 8 * maxBytes
	}
	if size > budget {
		return r, size / float64(total), nil, fmt.Errorf("the recipe alone needs %.2f bits per weight (%.0f bytes), over the --max-size budget", size/float64(total), size/8)
	}
	if perBit {
		rows = slices.Clone(rows)
		gain := func(r Row) float64 {
			if r.W8Bits <= r.Bits {
				return 0
			}
			return r.KL / ((r.W8Bits - r.Bits) * float64(r.Params))
		}
		slices.SortStableFunc(rows, func(a, b Row) int {
			switch ga, gb := gain(a), gain(b); {
			case ga > gb:
				return -1
			case ga < gb:
				return 1
			}
			return 0
		})
	}
	var kept []string
	var over []quant.Override
	for _, row := range rows {
		if row.W8Bits <= row.Bits {
			continue
		}
		extra := (row.W8Bits - row.Bits) * float64(row.Params)
		if size+extra > budget {
			continue
		}
		o, err := quant.NewOverride(row.Name, quant.Scheme{Kind: quant.KindW8})
		if err != nil {
			return r, 0, nil, err
		}
		over = append(over, o)
		kept = append(kept, row.Name)
		size += extra
	}
	r.Overrides = append(over, r.Overrides...)
	r.Name += "+auto"
	return r, size / float64(total), kept, nil
}

// OtherBits returns the estimated storage in bits of the parameters of the
// model at src that are not among rows (norms in float32, a lookup-only
// embedding at W8 or at the scheme of a recipe override naming it), and
// the count of all parameters.
func OtherBits(src string, r quant.Recipe, rows []Row) (float64, int, error) {
	m, err := load.Float(src)
	if err != nil {
		return 0, 0, err
	}
	g, err := arch.Build(&m.Config, arch.BuildOptions{})
	if err != nil {
		return 0, 0, err
	}
	linear := map[string]bool{}
	for _, r := range rows {
		linear[r.Name] = true
	}
	var bits float64
	total := 0
	for name, w := range m.Weights {
		total += len(w)
		if linear[name] {
			continue
		}
		shape := g.Weights[name]
		if s, ok := r.OverrideFor(name); ok && len(shape) == 2 {
			q, err := quant.Quantize(w, shape[0], shape[1], quant.FitWidth(s, shape[1]))
			if err != nil {
				return 0, 0, fmt.Errorf("tensor %s: %w", name, err)
			}
			bits += float64(len(w)) * q.BitsPerWeight()
		} else if len(shape) == 2 {
			bits += float64(len(w)) * (8 + 32/float64(shape[1]))
		} else {
			bits += 32 * float64(len(w))
		}
	}
	return bits, total, nil
}
