//go:build !unix

package safetensors

import (
	"fmt"
	"os"
)

// openRegion opens path for ReadAt; this platform has no mmap support here.
func openRegion(path string) (*region, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("safetensors: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("safetensors: %w", err)
	}
	return &region{r: f, size: st.Size(), close: f.Close}, nil
}
