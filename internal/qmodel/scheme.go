package qmodel

import (
	"fmt"

	"github.com/aotlm/aotlm/internal/format/safetensors"
	"github.com/aotlm/aotlm/internal/quant"
)

// folderScheme is one weight scheme's entry in the folder's table: the
// safetensors parts a weight of that scheme stores besides its integers
// (name.q, i8 [rows, cols]) and its scales (name.scales, f32), and how
// they are read back. f16 weights are stored as one f16 tensor instead
// and have no entry; q4k comes only from GGUF files and has none either.
type folderScheme struct {
	kind quant.Kind
	// parts returns the number of scales of a weight [rows, cols] and
	// its other parts (names, dtypes and shapes).
	parts func(name string, rows, cols int, s quant.Scheme) (scales int, extra []safetensors.Tensor)
	// read reads the other parts into q (whose integers and scales are
	// read) and sets in want the number of values each part must have
	// ("scales", "codes", "zeros"; "scales" is rows unless set).
	read func(ck *safetensors.Checkpoint, name string, q *quant.Quantized, alias bool, want map[string]int) error
}

// folderSchemes is the folder's scheme table.
var folderSchemes = map[quant.Kind]*folderScheme{}

func registerFolderScheme(fs *folderScheme) {
	if _, dup := folderSchemes[fs.kind]; dup {
		panic(fmt.Sprintf("qmodel: scheme %q registered twice", fs.kind))
	}
	folderSchemes[fs.kind] = fs
}

// blocksOf is the number of blocks (groups) of a weight [rows, cols] of
// scheme s, counting a padded last block; 0 for a scheme without blocks.
func blocksOf(rows, cols int, s quant.Scheme) int {
	if s.Block <= 0 {
		return 0
	}
	return rows * ((cols + s.Block - 1) / s.Block)
}

// storedBlocks is the number of block parameters a stored weight q must
// have: one per block of each row, one per row without blocks.
func storedBlocks(q *quant.Quantized) int {
	if q.Scheme.Block <= 0 {
		return q.Rows
	}
	return q.Rows * ((q.Cols + q.Scheme.Block - 1) / q.Scheme.Block)
}
