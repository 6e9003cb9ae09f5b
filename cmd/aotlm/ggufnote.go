package main

import (
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"github.com/dustin/go-humanize"

	"github.com/aotlm/aotlm/internal/compile"
	"github.com/aotlm/aotlm/internal/format/gguf"
)

// ggufQuantNote tells, after compiling a GGUF file, how its block-quantized
// weights (Q4_K, Q6_K, ...) were stored (see compile.GGUFConversionOf):
// kept 4-bit or 6-bit exactly, requantized to 8 bits (which changes
// them), or decoded to float32. It says nothing for other inputs.
func ggufQuantNote(src, artifact, mode string, w io.Writer) {
	f, err := gguf.Open(src)
	if err != nil {
		return
	}
	defer f.Close()
	byScheme := map[string]map[string]bool{} // scheme -> ggml types
	lossy := map[string]bool{}
	for _, t := range f.Tensors() {
		typ, ok := f.TensorType(t.Name)
		if !ok || typ.BlockSize() <= 1 {
			continue
		}
		c := compile.GGUFConversionOf(typ, mode, t.Name)
		if byScheme[c.Scheme] == nil {
			byScheme[c.Scheme] = map[string]bool{}
		}
		byScheme[c.Scheme][c.Type] = true
		if !c.Exact {
			lossy[c.Type] = true
		}
	}
	if len(byScheme) == 0 {
		return
	}
	var srcSize, artSize uint64
	if st, err := os.Stat(src); err == nil {
		srcSize = uint64(st.Size())
	}
	if st, err := os.Stat(artifact); err == nil {
		artSize = uint64(st.Size())
	}
	var parts []string
	for _, scheme := range sortedKeys(byScheme) {
		how := map[string]string{
			"f32":         "dequantized to float32 (exactly, nothing lost)",
			"q4/g32/sym":  "kept 4-bit (q4/g32/sym, exactly)",
			"q4/g32/asym": "kept 4-bit (q4/g32/asym, exactly up to float32 rounding of the zero points)",
			"q4k":         "kept 4-bit as their super-blocks (q4k-p, exactly)",
			"q6k":         "kept 6-bit as their super-blocks in the token embedding and classifier (q6k-p, exactly)",
			"w8":          "requantized to 8 bits per weight, one scale per row (w8: a small change, see docs/formats.md)",
		}[scheme]
		parts = append(parts, fmt.Sprintf("the %s weights were %s", strings.Join(sortedKeys(byScheme[scheme]), ", "), how))
	}
	fmt.Fprintf(w, "note: %s: %s; the artifact is %s, the GGUF %s\n", src, strings.Join(parts, "; "),
		humanize.IBytes(artSize), humanize.IBytes(srcSize))
	if len(lossy) > 0 {
		fmt.Fprintf(w, "note: --gguf-weights f32 keeps the %s weights exact (as float32: larger and slower)\n", strings.Join(sortedKeys(lossy), ", "))
	}
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
