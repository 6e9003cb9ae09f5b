package compile

import (
	"sort"

	"github.com/aotlm/aotlm/internal/format/gguf"
)

// GGUFSummary says how compiling a GGUF file in a mode stores its
// block-quantized weights (GGUFConversionOf, tallied over the file).
type GGUFSummary struct {
	// Types gives, by aotlm scheme ("q4k", "w8", "f32", ...), the sorted
	// ggml types stored so.
	Types map[string][]string
	// Lossy are the sorted ggml types whose values change.
	Lossy []string
}

// SummarizeGGUF tallies how the block-quantized weights of the GGUF file
// at path are stored in mode; ok is false when path is not a GGUF file
// or holds no block-quantized weight.
func SummarizeGGUF(path, mode string) (s GGUFSummary, ok bool) {
	f, err := gguf.Open(path)
	if err != nil {
		return s, false
	}
	defer f.Close()
	byScheme := map[string]map[string]bool{}
	lossy := map[string]bool{}
	for _, t := range f.Tensors() {
		typ, ok := f.TensorType(t.Name)
		if !ok || typ.BlockSize() <= 1 {
			continue
		}
		c := GGUFConversionOf(typ, mode, t.Name)
		if byScheme[c.Scheme] == nil {
			byScheme[c.Scheme] = map[string]bool{}
		}
		byScheme[c.Scheme][c.Type] = true
		if !c.Exact {
			lossy[c.Type] = true
		}
	}
	if len(byScheme) == 0 {
		return s, false
	}
	s.Types = map[string][]string{}
	for scheme, types := range byScheme {
		s.Types[scheme] = sortedKeys(types)
	}
	s.Lossy = sortedKeys(lossy)
	return s, true
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
