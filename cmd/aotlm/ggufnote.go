package main

import (
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"github.com/dustin/go-humanize"

	"github.com/aotlm/aotlm/internal/compile"
)

// ggufQuantNote tells, after compiling a GGUF file, how its block-quantized
// weights (Q4_K, Q6_K, ...) were stored (see compile.SummarizeGGUF):
// kept 4-bit or 6-bit exactly, requantized to 8 bits (which changes
// them), or decoded to float32. It says nothing for other inputs.
func ggufQuantNote(src, artifact, mode string, w io.Writer) {
	sum, ok := compile.SummarizeGGUF(src, mode)
	if !ok {
		return
	}
	var srcSize, artSize uint64
	if st, err := os.Stat(src); err == nil {
		srcSize = uint64(st.Size())
	}
	if st, err := os.Stat(artifact); err == nil {
		artSize = uint64(st.Size())
	}
	schemes := make([]string, 0, len(sum.Types))
	for s := range sum.Types {
		schemes = append(schemes, s)
	}
	sort.Strings(schemes)
	var parts []string
	for _, scheme := range schemes {
		how := map[string]string{
			"f32":         "dequantized to float32 (exactly, nothing lost)",
			"q4/g32/sym":  "kept 4-bit (q4/g32/sym, exactly)",
			"q4/g32/asym": "kept 4-bit (q4/g32/asym, exactly up to float32 rounding of the zero points)",
			"q4k":         "kept 4-bit as their super-blocks (q4k-p, exactly)",
			"q6k":         "kept 6-bit as their super-blocks in the token embedding and classifier (q6k-p, exactly)",
			"w8":          "requantized to 8 bits per weight, one scale per row (w8: a small change, see docs/formats.md)",
		}[scheme]
		parts = append(parts, fmt.Sprintf("the %s weights were %s", strings.Join(sum.Types[scheme], ", "), how))
	}
	fmt.Fprintf(w, "note: %s: %s; the artifact is %s, the GGUF %s\n", src, strings.Join(parts, "; "),
		humanize.IBytes(artSize), humanize.IBytes(srcSize))
	if len(sum.Lossy) > 0 {
		fmt.Fprintf(w, "note: --gguf-weights f32 keeps the %s weights exact (as float32: larger and slower)\n", strings.Join(sum.Lossy, ", "))
	}
}
