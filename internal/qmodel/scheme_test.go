package qmodel

import (
	"testing"

	"github.com/aotlm/aotlm/internal/quant"
)

// TestFolderSchemesComplete: every scheme a recipe may choose, other
// than f16 (stored as one f16 tensor), has the folder's entry.
func TestFolderSchemesComplete(t *testing.T) {
	for _, info := range quant.Schemes() {
		fs, ok := folderSchemes[info.Kind]
		switch {
		case info.Kind == quant.KindF16 || !info.Recipe:
			if ok {
				t.Errorf("%s: has a folder entry it never uses", info.Kind)
			}
		case !ok || fs.parts == nil || fs.read == nil:
			t.Errorf("%s: no complete folder entry", info.Kind)
		}
	}
}
