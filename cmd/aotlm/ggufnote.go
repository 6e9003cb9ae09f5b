package main

import (
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"github.com/dustin/go-humanize"

	"github.com/aotlm/aotlm/internal/format/gguf"
)

// ggufQuantNote tells, after compiling a GGUF file, that its block-quantized
// weights (Q4_K, Q6_K, ...) were dequantized to float32 on load: exact, but
// the artifact is larger than the file. It says nothing for other inputs.
func ggufQuantNote(src, artifact string, w io.Writer) {
	f, err := gguf.Open(src)
	if err != nil {
		return
	}
	defer f.Close()
	seen := map[string]bool{}
	for _, t := range f.Tensors() {
		if typ, ok := f.TensorType(t.Name); ok && typ.BlockSize() > 1 {
			seen[typ.String()] = true
		}
	}
	if len(seen) == 0 {
		return
	}
	var types []string
	for s := range seen {
		types = append(types, s)
	}
	sort.Strings(types)
	var srcSize, artSize uint64
	if st, err := os.Stat(src); err == nil {
		srcSize = uint64(st.Size())
	}
	if st, err := os.Stat(artifact); err == nil {
		artSize = uint64(st.Size())
	}
	fmt.Fprintf(w, "note: the %s weights of %s were dequantized to float32 (exactly, nothing lost): the artifact is %s, the GGUF %s; for a 4- or 8-bit artifact, aotlm quantize the model with a recipe first\n",
		strings.Join(types, ", "), src, humanize.IBytes(artSize), humanize.IBytes(srcSize))
}
