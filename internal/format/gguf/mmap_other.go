//go:build !(linux || android || darwin || freebsd || netbsd || openbsd || dragonfly)

package gguf

import (
	"errors"
	"os"
)

// mmapFile is unavailable on this platform; Open reads through the file.
func mmapFile(*os.File, int64) ([]byte, func() error, error) {
	return nil, nil, errors.New("mmap not supported on this platform")
}
