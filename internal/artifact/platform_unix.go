//go:build unix

package artifact

import (
	"os"
)

// syncDir flushes the directory entry of a just-renamed file to disk.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
