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
	// applies only in its own checkpoint's layout, before conversion.
	Converted bool
	// Loaded tells that the family reads its weights with its own loader
	// (RWKV-7): adapters do not apply.
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
