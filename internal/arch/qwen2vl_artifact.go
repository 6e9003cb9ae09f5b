package arch

// Qwen2VLArtifact is the config a compiled Qwen2-VL encoder carries in
// the artifact's manifest (plan.Vision.Config, family "qwen2vl"): the
// encoder's shape, normalization and image token, and the pixel limits of
// the smart resize, so that preprocessing needs nothing else.
type Qwen2VLArtifact struct {
	Qwen2VLVision
	MinPixels int `json:"min_pixels"`
	MaxPixels int `json:"max_pixels"`
}
