package main

import (
	"os"
	"testing"

	"github.com/aotlm/aotlm/internal/compile"
)

// TestMain points the compile cache at a temporary folder, so tests never
// touch the user's cache.
func TestMain(m *testing.M) {
	if os.Getenv(subprocessEnv) != "" {
		os.Exit(subprocessMain(os.Getenv(subprocessEnv), os.Args[1:]))
	}
	dir, err := os.MkdirTemp("", "aotlm-cache-")
	if err != nil {
		panic(err)
	}
	os.Setenv(compile.CacheEnv, dir)
	code := m.Run()
	os.RemoveAll(dir)
	removeBinary()
	os.Exit(code)
}
