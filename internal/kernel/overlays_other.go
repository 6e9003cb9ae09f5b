//go:build purego || !(amd64 || arm64)

package kernel

// archOverlays: this build uses the generic kernels only.
func archOverlays() []Overlay { return nil }

// decodeWalks: the generic products have one fixed walk (see Tune).
func decodeWalks() []int32 { return nil }
