//go:build !unix

package artifact

import "os"

// openSource opens path for ReadAt; this platform has no mmap support here,
// so tensor data is read into memory on request.
func openSource(path string) (*source, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	return &source{r: f, size: st.Size(), closeFn: f.Close}, nil
}

// syncDir is a no-op where directories cannot be synced.
func syncDir(string) error { return nil }
