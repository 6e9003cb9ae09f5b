package compile

import (
	"encoding/json"
	"fmt"

	"github.com/aotlm/aotlm/internal/arch"
	"github.com/aotlm/aotlm/internal/graph"
	"github.com/aotlm/aotlm/internal/tokenizer"
	"github.com/aotlm/aotlm/internal/vision"
)

// Marker pieces of the Qwen2-VL prompt layout, recorded with their ids.
var qwen2vlMarkers = []string{"<|vision_start|>", "<|vision_end|>", "<|image_pad|>"}

// qwen2vlInput makes the VisionInput of a Qwen2-VL encoder and merger:
// one plan per image size of opts.VisionBuckets (or the default buckets),
// each reading the size's patch rows, the marker ids looked up with tok.
func qwen2vlInput(v arch.Qwen2VLVision, w graph.Weights, tok tokenizer.Tokenizer, opts Options) (*VisionInput, error) {
	weights, err := checkVisionWeights(opts.VisionWeights)
	if err != nil {
		return nil, err
	}
	g, err := arch.BuildQwen2VLVision(&v)
	if err != nil {
		return nil, err
	}
	proc := vision.NewQwen2VL(v.PatchSize, v.Merge)
	buckets := proc.DefaultBuckets()
	if opts.VisionBuckets != "" {
		if buckets, err = vision.ParseBuckets(opts.VisionBuckets, proc.Align); err != nil {
			return nil, fmt.Errorf("compile: %w", err)
		}
	}
	markers := map[string]int{}
	if tok != nil {
		for _, p := range qwen2vlMarkers {
			ids := tok.Encode(p, tokenizer.EncodeOptions{ParseSpecial: true})
			if len(ids) == 1 {
				markers[p] = ids[0]
			}
		}
	}
	if v.ImageTokenID < 0 {
		if id, ok := markers["<|image_pad|>"]; ok {
			v.ImageTokenID = id
		}
	}
	cfg, err := json.Marshal(arch.Qwen2VLArtifact{Qwen2VLVision: v, MinPixels: proc.MinPixels, MaxPixels: proc.MaxPixels})
	if err != nil {
		return nil, fmt.Errorf("compile: vision config: %w", err)
	}
	in := &VisionInput{Graph: g, Weights: w, Family: "qwen2vl", Config: cfg, Markers: markers, Weights8: weights == VisionW8, WeightsF16: weights == VisionF16}
	for _, b := range buckets {
		in.Sizes = append(in.Sizes, VisionSize{Height: b.H, Width: b.W, Rows: (b.H / v.PatchSize) * (b.W / v.PatchSize)})
	}
	return in, nil
}
