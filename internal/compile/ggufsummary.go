package compile

import (
	"fmt"
	"sort"
	"strings"

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

// storedAs words how each scheme of a GGUFSummary stores the weights.
var storedAs = map[string]string{
	"f32":         "dequantized to float32 (exactly, nothing lost)",
	"q4/g32/sym":  "kept 4-bit (q4/g32/sym, exactly)",
	"q4/g32/asym": "kept 4-bit (q4/g32/asym, exactly up to float32 rounding of the zero points)",
	"q4k":         "kept 4-bit as their super-blocks (q4k-p, exactly)",
	"q6k":         "kept 6-bit as their super-blocks in the token embedding and classifier (q6k-p, exactly)",
	"w8":          "requantized to 8 bits per weight, one scale per row (w8: a small change, see docs/formats.md)",
}

// Describe says in words how the weights were stored, scheme by scheme:
// "the Q4_K weights were kept 4-bit as their super-blocks (q4k-p,
// exactly); the Q6_K weights were ...".
func (s GGUFSummary) Describe() string {
	schemes := make([]string, 0, len(s.Types))
	for scheme := range s.Types {
		schemes = append(schemes, scheme)
	}
	sort.Strings(schemes)
	parts := make([]string, len(schemes))
	for i, scheme := range schemes {
		parts[i] = fmt.Sprintf("the %s weights were %s", strings.Join(s.Types[scheme], ", "), storedAs[scheme])
	}
	return strings.Join(parts, "; ")
}
