package main

import (
	"fmt"
	"io"
	"os"
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
	fmt.Fprintf(w, "note: %s: %s; the artifact is %s, the GGUF %s\n", src, sum.Describe(), fileSize(artifact), fileSize(src))
	if len(sum.Lossy) > 0 {
		fmt.Fprintf(w, "note: --gguf-weights f32 keeps the %s weights exact (as float32: larger and slower)\n", strings.Join(sum.Lossy, ", "))
	}
}

// fileSize is the size of a file in binary units (0 B when unknown).
func fileSize(path string) string {
	var n uint64
	if st, err := os.Stat(path); err == nil {
		n = uint64(st.Size())
	}
	return humanize.IBytes(n)
}
