package qmodel

import (
	"github.com/aotlm/aotlm/internal/format/safetensors"
	"github.com/aotlm/aotlm/internal/quant"
)

// w8 weights store their integers and one scale per row, nothing else.
func init() {
	registerFolderScheme(&folderScheme{
		kind:  quant.KindW8,
		parts: func(_ string, rows, _ int, _ quant.Scheme) (int, []safetensors.Tensor) { return rows, nil },
		read: func(*safetensors.Checkpoint, string, *quant.Quantized, bool, map[string]int) error {
			return nil
		},
	})
}
