package load

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// ModelsIn lists the models of a folder: its .aot and .gguf files and its
// subfolders (checkpoints), by name; hidden entries are skipped.
func ModelsIn(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("--models-dir: %w", err)
	}
	var out []string
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, ".") {
			continue
		}
		if e.IsDir() || strings.HasSuffix(name, ".aot") || strings.HasSuffix(name, ".gguf") {
			out = append(out, filepath.Join(dir, name))
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("--models-dir %s: no .aot or .gguf file and no model folder in it", dir)
	}
	sort.Strings(out)
	return out, nil
}

// PathBytes is the size of a model file, or of a folder's files.
func PathBytes(path string) int64 {
	var n int64
	filepath.WalkDir(path, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if info, err := d.Info(); err == nil {
				n += info.Size()
			}
		}
		return nil
	})
	return n
}
