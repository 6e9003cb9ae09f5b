//go:build !unix

package mmapfile

import "os"

// mapFile is unavailable here; Open reads through the file.
func mapFile(*os.File, int64) ([]byte, func() error, error) { return nil, nil, errNotMappable }

func release([]byte) {}

// hugeMapped needs Linux's /proc.
func hugeMapped([]byte) int64 { return 0 }

// hugePagesAvailable: transparent huge pages are Linux's.
func hugePagesAvailable() bool { return false }
