//go:build nodemo

package demo

// This build leaves the demo model out.
var (
	gguf    []byte
	license string
)
