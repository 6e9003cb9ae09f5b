// Package detect opens a checkpoint of any supported format by looking at
// the path: a directory or .safetensors / index.json file is a safetensors
// model, a file starting with "GGUF" is GGUF, one starting with llama2.c's
// "ak42" magic (or a .bin file with a plausible legacy header) is llama2.c,
// and a zip archive is a PyTorch checkpoint (torch.save since 1.6).
package detect

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/aotlm/aotlm/internal/format"
	"github.com/aotlm/aotlm/internal/format/gguf"
	"github.com/aotlm/aotlm/internal/format/llama2c"
	"github.com/aotlm/aotlm/internal/format/pytorch"
	"github.com/aotlm/aotlm/internal/format/safetensors"
	"github.com/aotlm/aotlm/internal/userfile"
)

// Open opens the checkpoint at path.
func Open(path string) (format.Checkpoint, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	if st.IsDir() {
		return checkpoint(safetensors.Open(path))
	}
	if err := userfile.CheckModel(path); err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	if strings.HasSuffix(path, ".safetensors") || filepath.Base(path) == "model.safetensors.index.json" {
		return checkpoint(safetensors.Open(path))
	}
	f, _, err := userfile.Open(path, userfile.Model)
	if err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	head := make([]byte, 8)
	n, err := io.ReadFull(f, head)
	f.Close()
	if err != nil && n < 4 {
		return nil, fmt.Errorf("model %s: file of %d bytes is too short to be a checkpoint", path, st.Size())
	}
	switch {
	case bytes.HasPrefix(head, []byte("GGUF")):
		return checkpoint(gguf.Open(path))
	case bytes.HasPrefix(head, []byte("PK\x03\x04")):
		return checkpoint(pytorch.Open(path))
	case bytes.HasPrefix(head, []byte("ak42")), bytes.HasPrefix(head, []byte("24ka")):
		return checkpoint(llama2c.Open(path))
	case strings.HasSuffix(path, ".bin"):
		return checkpoint(llama2c.Open(path))
	}
	return nil, fmt.Errorf("model %s: unrecognized file format (magic % x); expected GGUF, safetensors (a model folder with config.json), a PyTorch .pth or a llama2.c .bin", path, head[:4])
}

// checkpoint converts a reader's concrete result, keeping a nil interface on error.
func checkpoint[T format.Checkpoint](c T, err error) (format.Checkpoint, error) {
	if err != nil {
		return nil, err
	}
	return c, nil
}
