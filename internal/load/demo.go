package load

import (
	"path/filepath"

	"github.com/aotlm/aotlm/internal/compile"
	"github.com/aotlm/aotlm/internal/demo"
)

// DemoAbout says which model the built-in demo is.
const DemoAbout = demo.About

// Demo returns the path of the demo model built into the binary,
// unpacked once into the cache folder's "demo".
func Demo() (string, error) {
	dir, err := compile.CacheDir()
	if err != nil {
		return "", err
	}
	return demo.Path(filepath.Join(dir, "demo"))
}
