package qmodel

import (
	"fmt"
	"unsafe"

	"github.com/aotlm/aotlm/internal/format/safetensors"
	"github.com/aotlm/aotlm/internal/quant"
	"github.com/aotlm/aotlm/internal/tensor"
)

// q6k weights store a sub-scale per group of 16 (name.sub, i8) and a
// scale d per super-block of 256.
func init() {
	registerFolderScheme(&folderScheme{
		kind: quant.KindQ6K,
		parts: func(name string, rows, cols int, _ quant.Scheme) (int, []safetensors.Tensor) {
			return rows * cols / quant.Q6KSuper, []safetensors.Tensor{{Name: name + ".sub", DType: tensor.I8, Shape: []int64{int64(rows * cols / quant.Q6KGroup)}}}
		},
		read: func(ck *safetensors.Checkpoint, name string, q *quant.Quantized, alias bool, want map[string]int) error {
			n := q.Rows * q.Cols
			if q.Cols%quant.Q6KSuper != 0 {
				return fmt.Errorf("q6k needs a width that is a multiple of %d, has %d", quant.Q6KSuper, q.Cols)
			}
			sub, err := ck.Bytes(name + ".sub")
			if err != nil {
				return err
			}
			if len(sub) != n/quant.Q6KGroup {
				return fmt.Errorf("sub has %d values, %v needs %d", len(sub), q.Scheme, n/quant.Q6KGroup)
			}
			if alias {
				q.Sub = unsafe.Slice((*int8)(unsafe.Pointer(unsafe.SliceData(sub))), len(sub))
			} else {
				q.Sub = make([]int8, len(sub))
				for i, b := range sub {
					q.Sub[i] = int8(b)
				}
			}
			want["scales"] = n / quant.Q6KSuper
			return nil
		},
	})
}
