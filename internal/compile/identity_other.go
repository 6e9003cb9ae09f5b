//go:build !linux

package compile

import "io/fs"

// fileIdentity has nothing beyond size and modification time here.
func fileIdentity(fs.FileInfo) string { return "" }
