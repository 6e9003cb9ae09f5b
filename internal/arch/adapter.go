package arch

import (
	"fmt"
	"strings"
)

// familyOf returns the registered family named by c.Family.
func familyOf(c *Config) (*Family, error) {
	for _, f := range families {
		if f.Name == c.Family {
			return f, nil
		}
	}
	return nil, fmt.Errorf("no family named %q", c.Family)
}

// TensorNameIn returns the name the canonical weight name has in a
// checkpoint of source ("hf" or "gguf") of c's family.
func TensorNameIn(c *Config, source, canonical string) (string, bool) {
	f, err := familyOf(c)
	if err != nil || f.tensorNames == nil {
		return "", false
	}
	return f.tensorNames(source, canonical)
}

// AdapterLayout tells how a low-rank adapter trained on c's family
// lines up with the weights of a model of config c.
type AdapterLayout struct {
	// Converted tells that the family turns some weights from the
	// checkpoint's layout into the graph's (Qwen3.5, Granite 4 hybrid,
	// CodeGen), or reshapes them on load (RWKV-7): an adapter then
	// applies only to a checkpoint of its own layout, and in the graph's
	// layout after the same conversion (ConvertedLinear).
	Converted bool
	// Loaded tells that the family reads its weights with its own loader
	// (RWKV-7): adapters apply only to the weights it keeps as stored
	// (LoadedAsStored), from an adapter naming them as the checkpoint does.
	Loaded bool
}

// LayoutOf returns the adapter layout of c's family.
func LayoutOf(c *Config) (AdapterLayout, error) {
	f, err := familyOf(c)
	if err != nil {
		return AdapterLayout{}, err
	}
	return AdapterLayout{Converted: f.convert != nil || f.load != nil, Loaded: f.load != nil}, nil
}

// LoadedAsStored tells whether the family of c, reading its weights
// with its own loader (AdapterLayout.Loaded), keeps the canonical weight
// as the checkpoint stores it: an adapter may change such a weight.
func LoadedAsStored(c *Config, canonical string) bool {
	f, err := familyOf(c)
	return err == nil && f.loadedAsStored != nil && f.loadedAsStored(canonical)
}

// QKPermutation returns the head count by which llama.cpp's converter
// permutes the rows of the canonical weight of c's family in GGUF files
// (the q projection by the query heads, k by the key/value heads), or 0
// when the weight is stored in the same row order as Hugging Face's.
func QKPermutation(c *Config, canonical string) int {
	f, err := familyOf(c)
	if err != nil || !f.permutesQK {
		return 0
	}
	switch {
	case strings.HasSuffix(canonical, ".self_attn.q_proj.weight"):
		return c.Heads
	case strings.HasSuffix(canonical, ".self_attn.k_proj.weight"):
		return c.KVHeads
	}
	return 0
}

// ConvertedLinear returns how c's family, converting its weights on
// load, moves the rows and columns of the linear weight canonical
// [out, in] read from a checkpoint of c: row o of the converted weight
// is the checkpoint's row rows[o], and its column i the checkpoint's
// column cols[i] (nil when they stay in place). A low-rank adapter in
// the checkpoint's layout moves with it: B's rows by rows, A's columns
// by cols. A conversion of the weight that is not such a permutation is
// an error.
func ConvertedLinear(c *Config, canonical string, out, in int) (rows, cols []int, err error) {
	f, err := familyOf(c)
	if err != nil {
		return nil, nil, err
	}
	if f.convert == nil || out <= 0 || in <= 0 {
		return nil, nil, nil
	}
	if out*in > 1<<24 {
		return nil, nil, fmt.Errorf("%s: %dx%d values are more than float32 counts exactly", canonical, out, in)
	}
	// convert the weights whose values are their row (then column)
	// numbers: what lands where tells the permutation
	probe := func(of func(o, i int) int) ([]float32, error) {
		v := make([]float32, out*in)
		for o := range out {
			for i := range in {
				v[o*in+i] = float32(of(o, i))
			}
		}
		w, err := f.convert(c, canonical, v)
		if err == nil && len(w) != out*in {
			err = fmt.Errorf("converted to %d values from %d", len(w), out*in)
		}
		return w, err
	}
	ro, err := probe(func(o, _ int) int { return o })
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", canonical, err)
	}
	co, err := probe(func(_, i int) int { return i })
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", canonical, err)
	}
	rows, cols = make([]int, out), make([]int, in)
	for o := range out {
		rows[o] = int(ro[o*in])
	}
	for i := range in {
		cols[i] = int(co[i])
	}
	if !isPermutation(rows) || !isPermutation(cols) {
		return nil, nil, fmt.Errorf("%s: the %s family's conversion does not permute its rows and columns", canonical, c.Family)
	}
	for o := range out {
		for i := range in {
			if ro[o*in+i] != float32(rows[o]) || co[o*in+i] != float32(cols[i]) {
				return nil, nil, fmt.Errorf("%s: the %s family's conversion does not permute its rows and columns", canonical, c.Family)
			}
		}
	}
	if isIdentity(rows) {
		rows = nil
	}
	if isIdentity(cols) {
		cols = nil
	}
	return rows, cols, nil
}

// isPermutation reports whether p holds each of 0..len(p)-1 once.
func isPermutation(p []int) bool {
	seen := make([]bool, len(p))
	for _, v := range p {
		if v < 0 || v >= len(p) || seen[v] {
			return false
		}
		seen[v] = true
	}
	return true
}

func isIdentity(p []int) bool {
	for i, v := range p {
		if v != i {
			return false
		}
	}
	return true
}
