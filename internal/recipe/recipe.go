package recipe

import (
	"fmt"
	"os"
	"strings"

	"github.com/aotlm/aotlm/internal/quant"
)

// Load reads a preset name or a recipe file.
// A preset name wins over a file of the same name in the working folder.
func Load(arg string) (quant.Recipe, error) {
	if r, err := quant.Preset(arg); err == nil {
		return r, nil
	}
	if _, err := os.Stat(arg); err == nil {
		// a file that is not a regular one is refused by what it is
		return quant.LoadRecipe(arg)
	}
	return quant.Recipe{}, fmt.Errorf("recipe %q is neither a preset (%s) nor a recipe file", arg, strings.Join(quant.PresetNames(), ", "))
}

// WithLPBQMode sets the mode of every LPBQ scheme of the recipe, its name
// marked "+reference".
func WithLPBQMode(r quant.Recipe, mode quant.LPBQMode) quant.Recipe {
	if r.Default.Kind == quant.KindLPBQ {
		r.Default.Mode = mode
	}
	over := make([]quant.Override, len(r.Overrides))
	copy(over, r.Overrides)
	for i := range over {
		if over[i].Scheme.Kind == quant.KindLPBQ {
			over[i].Scheme.Mode = mode
		}
	}
	r.Overrides = over
	r.Name += "+reference"
	return r
}
