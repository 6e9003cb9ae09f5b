//go:build !unix

package hub

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"time"
)

// lockFile creates name exclusively, waiting while another process holds
// it; a lock older than an hour is taken to be left by a crash.
func lockFile(ctx context.Context, name string) (unlock func(), err error) {
	for {
		f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
		if err == nil {
			f.Close()
			return func() { os.Remove(name) }, nil
		}
		if !errors.Is(err, fs.ErrExist) {
			return nil, err
		}
		if st, err := os.Stat(name); err == nil && time.Since(st.ModTime()) > time.Hour {
			os.Remove(name)
			continue
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}
