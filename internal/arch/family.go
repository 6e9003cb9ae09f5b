package arch

import (
	"fmt"
	"sort"
	"strings"

	"github.com/aotlm/aotlm/internal/format"
	"github.com/aotlm/aotlm/internal/graph"
)

// BuildOptions shape the graph built for a config.
type BuildOptions struct {
	// AllLogits keeps the logits of every row; otherwise only the last row's
	// logits are computed (what generation needs).
	AllLogits bool
	// Hidden makes the output the rows the classifier reads (after the
	// final norm) instead of the logits: what Qwen3.5's draft head reads
	// (qwen35 only).
	Hidden bool
}

// Family describes one model family: how to read its config from each
// source format, where its tensors live in each format, and its graph.
type Family struct {
	Name string
	// HFArchitectures and HFModelTypes select the family from config.json.
	HFArchitectures []string
	HFModelTypes    []string
	// GGUFArchitectures select it from general.architecture.
	GGUFArchitectures []string

	configHF    func(meta map[string]any) (Config, error)
	configGGUF  func(meta map[string]any, arch string) (Config, error)
	tensorNames func(source, canonical string) (string, bool)
	build       func(c *Config, opts BuildOptions) (*graph.Graph, error)
	// validate replaces Config.Validate for families without attention
	// (RWKV-7); load replaces the name-mapped weight loading of Load for
	// families whose tensors need reshaping.
	validate func(c *Config) error
	load     func(ck format.Checkpoint, c *Config, g *graph.Graph) (graph.Weights, error)
	// loadedAsStored tells, for a family with its own loader, whether
	// the loader keeps the canonical weight as the checkpoint stores it
	// (nil: none is kept).
	loadedAsStored func(canonical string) bool
	// storedShape, when set, returns the shape a weight has in the
	// checkpoint when it differs from the graph's (the same values in the
	// same order, such as a squeezed dimension); convert turns the values
	// read into the graph's (Qwen3.5's HF weights into the GGUF layout).
	storedShape func(c *Config, canonical string, shape []int) []int
	convert     func(c *Config, canonical string, v []float32) ([]float32, error)
	// permutesQK tells that llama.cpp's converter permutes the rows of
	// the q and k projections of this family's GGUF files (for
	// interleaved RoPE), by head.
	permutesQK bool
}

// check validates c with the family's rule.
func (f *Family) check(c *Config) error {
	if f.validate != nil {
		return f.validate(c)
	}
	return c.Validate()
}

var families []*Family

func register(f *Family) { families = append(families, f) }

// Families lists the names of the supported families.
func Families() []string {
	var s []string
	for _, f := range families {
		s = append(s, f.Name)
	}
	sort.Strings(s)
	return s
}

// UnknownArchitectureError reports a model whose family aotlm does not know.
type UnknownArchitectureError struct {
	Source string // "hf", "gguf"
	Name   string
}

func (e *UnknownArchitectureError) Error() string {
	return fmt.Sprintf("unknown %s architecture %q (supported families: %s)",
		e.Source, e.Name, strings.Join(Families(), ", "))
}

func familyByHF(archs []string, modelType string) (*Family, error) {
	for _, f := range families {
		for _, a := range archs {
			for _, b := range f.HFArchitectures {
				if a == b {
					return f, nil
				}
			}
		}
	}
	for _, f := range families {
		for _, m := range f.HFModelTypes {
			if m == modelType {
				return f, nil
			}
		}
	}
	name := modelType
	if len(archs) > 0 {
		name = archs[0]
	}
	return nil, &UnknownArchitectureError{Source: "hf", Name: name}
}

func familyByGGUF(arch string) (*Family, error) {
	for _, f := range families {
		for _, a := range f.GGUFArchitectures {
			if a == arch {
				return f, nil
			}
		}
	}
	return nil, &UnknownArchitectureError{Source: "gguf", Name: arch}
}

// Build returns the forward graph of the config's family.
func Build(c *Config, opts BuildOptions) (*graph.Graph, error) {
	for _, f := range families {
		if f.Name == c.Family {
			if err := f.check(c); err != nil {
				return nil, err
			}
			return f.build(c, opts)
		}
	}
	return nil, fmt.Errorf("no family named %q", c.Family)
}
