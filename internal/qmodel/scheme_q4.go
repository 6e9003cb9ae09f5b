package qmodel

import (
	"github.com/aotlm/aotlm/internal/format/safetensors"
	"github.com/aotlm/aotlm/internal/quant"
	"github.com/aotlm/aotlm/internal/tensor"
)

// q4 weights store a scale per group and, asymmetric, a zero point per
// group (name.zeros, f32).
func init() {
	registerFolderScheme(&folderScheme{
		kind: quant.KindQ4,
		parts: func(name string, rows, cols int, s quant.Scheme) (int, []safetensors.Tensor) {
			blocks := blocksOf(rows, cols, s)
			if s.Sym || blocks == 0 {
				return blocks, nil
			}
			return blocks, []safetensors.Tensor{{Name: name + ".zeros", DType: tensor.F32, Shape: []int64{int64(blocks)}}}
		},
		read: func(ck *safetensors.Checkpoint, name string, q *quant.Quantized, _ bool, want map[string]int) error {
			blocks := storedBlocks(q)
			want["scales"] = blocks
			if !q.Scheme.Sym {
				var err error
				if q.Zeros, err = ck.ReadFloat32(name + ".zeros"); err != nil {
					return err
				}
				want["zeros"] = blocks
			}
			return nil
		},
	})
}
