//go:build !unix

package artifact

import "os"

// syncDir is a no-op where directories cannot be synced.
func syncDir(string) error { return nil }
