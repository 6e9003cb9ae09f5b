package lora

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/aotlm/aotlm/internal/arch"
)

// Resolved is an adapter tied to a model: its pairs under the model's
// canonical weight names, rows in the order of the model's weights.
type Resolved struct {
	Adapter *Adapter
	Pairs   map[string]*Pair
}

// rowOrder maps a checkpoint source to the source whose q and k row
// order it shares: llama2.c files keep Meta's interleaved order, as
// llama.cpp's GGUF files of Llama-type models do.
var rowOrder = map[string]string{"hf": "hf", "gguf": "gguf", "llama2c": "gguf", "pytorch": "pytorch"}

// sourceOf is the checkpoint layout an adapter's matrices are in.
func (a *Adapter) sourceOf() string {
	if a.Format == "gguf" {
		return "gguf"
	}
	return "hf"
}

// Resolve ties a to the model of config c whose weights have shapes
// (canonical name -> shape, [out, in] for a linear). The pairs come out
// in the checkpoint's row layout (what arch.Source.Adjust changes) or,
// with graph, in the graph's (what the engine's linears compute);
// the two differ only for families that convert weights on load, whose
// adapters move through the same conversion (arch.ConvertedLinear): a
// PEFT adapter forward to the graph's layout (a GGUF file's), a GGUF
// adapter back to a Hugging Face checkpoint's. An
// adapter matrix that matches no weight, or one of the wrong shape, is
// an error (an adapter for another base model).
func Resolve(a *Adapter, c *arch.Config, shapes map[string][]int, graph bool) (*Resolved, error) {
	order, ok := rowOrder[c.Source]
	if !ok {
		return nil, fmt.Errorf("lora: adapters apply to Hugging Face, GGUF, llama2.c and RWKV-7's PyTorch checkpoints, not to a %s one", c.Source)
	}
	lay, err := arch.LayoutOf(c)
	if err != nil {
		return nil, fmt.Errorf("lora: %w", err)
	}
	from := a.sourceOf()
	if lay.Loaded && from != "hf" {
		return nil, fmt.Errorf("lora: the %s family reads its own checkpoints: an adapter in %s layout does not apply (use a PEFT adapter naming the checkpoint's modules)", c.Family, from)
	}
	// a converting family turns its Hugging Face weights into the
	// graph's layout, which its GGUF files already have: a pair in the
	// Hugging Face layout moves forward to reach the graph's or a GGUF
	// file's layout, and a GGUF pair back to reach a Hugging Face
	// checkpoint's own
	converted := lay.Converted && !lay.Loaded
	forward := converted && from == "hf" && (graph || c.Source != "hf")
	back := converted && from == "gguf" && !graph && c.Source == "hf"
	hc := *c
	hc.Source = "hf"
	r := &Resolved{Adapter: a, Pairs: map[string]*Pair{}}
	used := map[string]bool{}
	names := make([]string, 0, len(shapes))
	for n := range shapes {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, name := range names {
		an, ok := arch.TensorNameIn(c, from, name)
		if !ok {
			continue
		}
		p := a.Pairs[an]
		if p == nil {
			continue
		}
		used[an] = true
		if lay.Loaded && !arch.LoadedAsStored(c, name) {
			return nil, fmt.Errorf("lora: %s: the %s family reshapes %s on load: an adapter on it is not supported", a.Path, c.Family, an)
		}
		sh := shapes[name]
		if len(sh) != 2 || sh[0] != p.Out || sh[1] != p.In {
			return nil, fmt.Errorf("lora: %s: %s is %dx%d, but the model's %s is %v (an adapter for another base model?)", a.Path, an, p.Out, p.In, name, sh)
		}
		q := p
		if h := arch.QKPermutation(c, name); h > 0 && from != order {
			if q, err = p.permuted(h, from == "hf"); err != nil {
				return nil, fmt.Errorf("lora: %s: %s: %w", a.Path, an, err)
			}
		}
		if forward || back {
			rows, cols, err := arch.ConvertedLinear(&hc, name, p.Out, p.In)
			if err != nil {
				return nil, fmt.Errorf("lora: %s: %w", a.Path, err)
			}
			if back {
				rows, cols = inverse(rows), inverse(cols)
			}
			q = q.moved(rows, cols)
		}
		r.Pairs[name] = q
	}
	var stray []string
	for _, n := range a.Names() {
		if !used[n] {
			stray = append(stray, n)
		}
	}
	if len(stray) > 0 {
		if len(stray) > 3 {
			stray = append(stray[:3], fmt.Sprintf("and %d more", len(stray)-3))
		}
		return nil, fmt.Errorf("lora: %s: %s match no weight of the %s model (an adapter for another base model?)", a.Path, strings.Join(stray, ", "), c.Family)
	}
	return r, nil
}

// inverse returns the inverse of the permutation p (nil for nil).
func inverse(p []int) []int {
	if p == nil {
		return nil
	}
	q := make([]int, len(p))
	for i, v := range p {
		q[v] = i
	}
	return q
}

// moved returns p with B's rows (and DoRA's magnitudes) in the order
// rows gives (row o is p's row rows[o]) and A's columns in the order
// cols gives; p itself when both are nil.
func (p *Pair) moved(rows, cols []int) *Pair {
	if rows == nil && cols == nil {
		return p
	}
	q := *p
	if rows != nil {
		q.B = make([]float32, len(p.B))
		for o, from := range rows {
			copy(q.B[o*p.Rank:(o+1)*p.Rank], p.B[from*p.Rank:(from+1)*p.Rank])
		}
		if p.Magnitude != nil {
			q.Magnitude = make([]float32, len(p.Magnitude))
			for o, from := range rows {
				q.Magnitude[o] = p.Magnitude[from]
			}
		}
	}
	if cols != nil {
		q.A = make([]float32, len(p.A))
		for r := range p.Rank {
			for i, from := range cols {
				q.A[r*p.In+i] = p.A[r*p.In+from]
			}
		}
	}
	return &q
}

// permuted returns p with its output rows (B's rows and DoRA's
// magnitudes) in llama.cpp's q/k order for heads heads when toGGUF,
// else back in Hugging Face's: within each head, row j·half+i of
// Hugging Face's order is row 2i+j of llama.cpp's.
func (p *Pair) permuted(heads int, toGGUF bool) (*Pair, error) {
	if heads <= 0 || p.Out%(2*heads) != 0 {
		return nil, fmt.Errorf("%d rows do not split into %d heads of pairs", p.Out, heads)
	}
	per := p.Out / heads
	half := per / 2
	q := *p
	q.B = make([]float32, len(p.B))
	if p.Magnitude != nil {
		q.Magnitude = make([]float32, len(p.Magnitude))
	}
	for h := 0; h < heads; h++ {
		for i := 0; i < half; i++ {
			for j := 0; j < 2; j++ {
				hfRow, ggRow := h*per+j*half+i, h*per+2*i+j
				src, dst := hfRow, ggRow
				if !toGGUF {
					src, dst = ggRow, hfRow
				}
				copy(q.B[dst*p.Rank:(dst+1)*p.Rank], p.B[src*p.Rank:(src+1)*p.Rank])
				if p.Magnitude != nil {
					q.Magnitude[dst] = p.Magnitude[src]
				}
			}
		}
	}
	return &q, nil
}

// Attach reads the adapters of specs and sets s.Adjust to merge them,
// each at its scale, into the weights s reads (in order, for weights
// more than one adapter changes).
func Attach(s *arch.Source, specs []Spec) error {
	if len(specs) == 0 {
		return nil
	}
	if s.Adjust == nil {
		s.Adjust = map[string]func([]float32) error{}
	}
	for _, sp := range specs {
		a, err := Read(sp.Path)
		if err != nil {
			return err
		}
		r, err := Resolve(a, &s.Config, s.Shapes, false)
		if err != nil {
			return err
		}
		for name, p := range r.Pairs {
			prev, p, scale := s.Adjust[name], p, sp.Scale
			s.Adjust[name] = func(v []float32) error {
				if prev != nil {
					if err := prev(v); err != nil {
						return err
					}
				}
				return p.Merge(v, scale)
			}
		}
	}
	return nil
}

// ToGGUF returns the pairs of a, a PEFT adapter for the model of config
// c (read from its Hugging Face folder, with weight shapes), under the
// model's GGUF tensor names and in llama.cpp's row order (for a family
// that converts its weights on load, in the converted layout), with the alpha
// llama.cpp's format stores: what WriteGGUF writes. Every pair must
// have the same alpha (alpha/rank, or alpha/√rank with rsLoRA, times the
// rank); DoRA adapters have no GGUF form.
func ToGGUF(a *Adapter, c *arch.Config, shapes map[string][]int) (map[string]*Pair, float32, error) {
	if a.Format != "peft" || c.Source != "hf" {
		return nil, 0, fmt.Errorf("lora: ToGGUF converts a PEFT adapter resolved against a Hugging Face model, not a %s one against a %s model", a.Format, c.Source)
	}
	// the graph's layout from a Hugging Face checkpoint is the GGUF
	// file's, after the q and k reordering below
	r, err := Resolve(a, c, shapes, true)
	if err != nil {
		return nil, 0, err
	}
	out := map[string]*Pair{}
	var alpha float32
	for i, name := range slices.Sorted(maps.Keys(r.Pairs)) {
		p := r.Pairs[name]
		if p.Magnitude != nil {
			return nil, 0, fmt.Errorf("lora: %s: DoRA has no GGUF adapter form", name)
		}
		al := p.Scale * float32(p.Rank)
		if i == 0 {
			alpha = al
		} else if al != alpha {
			return nil, 0, fmt.Errorf("lora: %s: alpha %g differs from the adapter's %g: one GGUF alpha cannot hold both", name, al, alpha)
		}
		gn, ok := arch.TensorNameIn(c, "gguf", name)
		if !ok {
			return nil, 0, fmt.Errorf("lora: %s has no GGUF name in the %s family", name, c.Family)
		}
		if h := arch.QKPermutation(c, name); h > 0 {
			if p, err = p.permuted(h, true); err != nil {
				return nil, 0, fmt.Errorf("lora: %s: %w", name, err)
			}
		}
		out[gn] = p
	}
	return out, alpha, nil
}
