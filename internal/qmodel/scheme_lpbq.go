package qmodel

import (
	"github.com/aotlm/aotlm/internal/format/safetensors"
	"github.com/aotlm/aotlm/internal/quant"
	"github.com/aotlm/aotlm/internal/tensor"
)

// lpbq weights store a code per block (name.codes, u8) besides a scale per row.
func init() { registerFolderScheme(lpbqFolder(quant.KindLPBQ)) }

// lpbqFolder is the folder entry of a scheme stored as lpbq is (lpbq,
// lpbq5).
func lpbqFolder(kind quant.Kind) *folderScheme {
	return &folderScheme{
		kind: kind,
		parts: func(name string, rows, cols int, s quant.Scheme) (int, []safetensors.Tensor) {
			blocks := blocksOf(rows, cols, s)
			if blocks == 0 {
				return rows, nil
			}
			return rows, []safetensors.Tensor{{Name: name + ".codes", DType: tensor.U8, Shape: []int64{int64(blocks)}}}
		},
		read: func(ck *safetensors.Checkpoint, name string, q *quant.Quantized, alias bool, want map[string]int) error {
			c, err := ck.Bytes(name + ".codes")
			if err != nil {
				return err
			}
			if alias {
				q.Codes = c
			} else {
				q.Codes = append([]uint8(nil), c...)
			}
			want["codes"] = storedBlocks(q)
			return nil
		},
	}
}
