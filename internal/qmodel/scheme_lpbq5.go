package qmodel

import "github.com/aotlm/aotlm/internal/quant"

// lpbq5 weights store their parts as lpbq's: a code per block
// (name.codes, u8) besides a scale per row.
func init() { registerFolderScheme(lpbqFolder(quant.KindLPBQ5)) }
