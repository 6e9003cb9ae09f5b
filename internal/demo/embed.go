//go:build !nodemo

package demo

import _ "embed"

//go:embed stories260K.gguf
var gguf []byte

//go:embed LICENSE
var license string
