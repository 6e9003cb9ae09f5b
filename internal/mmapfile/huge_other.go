//go:build !linux

package mmapfile

import "os"

// readHuge is Linux only; elsewhere OpenHugePages maps the file as Open does.
func readHuge(*os.File, int64) ([]byte, func() error, error) { return nil, nil, errNotMappable }

// dropCached is Linux only.
func dropCached(*os.File) {}
