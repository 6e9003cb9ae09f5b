package lora

// ReadOracle and MaxDiff serve the external tests of this package.
var (
	ReadOracle = readOracle
	MaxDiff    = maxDiff
)
