package compile

import (
	"encoding/json"
	"fmt"

	"github.com/aotlm/aotlm/internal/arch"
	"github.com/aotlm/aotlm/internal/format"
	"github.com/aotlm/aotlm/internal/graph"
	"github.com/aotlm/aotlm/internal/tokenizer"
	"github.com/aotlm/aotlm/internal/vision"
)

func init() {
	registerVisionCompiler(arch.Qwen2VLVisionFamily, &visionCompiler{
		fromHF: func(ck format.Checkpoint, pre map[string]any, textHidden int, tok tokenizer.Tokenizer, opts Options) (*VisionInput, error) {
			v, w, err := arch.LoadQwen2VLVisionHF(ck, pre, textHidden)
			if err != nil {
				return nil, err
			}
			return qwen2vlInput(v, w, tok, opts)
		},
		fromMMProj: func(mm format.Checkpoint, textHidden int, tok tokenizer.Tokenizer, opts Options) (*VisionInput, error) {
			v, w, err := arch.LoadQwen2VLVisionMMProj(mm, textHidden)
			if err != nil {
				return nil, err
			}
			return qwen2vlInput(v, w, tok, opts)
		},
	})
}

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
	markers := markerIDs(tok, qwen2vlMarkers)
	if v.ImageTokenID < 0 {
		if id, ok := markers["<|image_pad|>"]; ok {
			v.ImageTokenID = id
		}
	}
	cfg, err := json.Marshal(arch.Qwen2VLArtifact{Qwen2VLVision: v, MinPixels: proc.MinPixels, MaxPixels: proc.MaxPixels})
	if err != nil {
		return nil, fmt.Errorf("compile: vision config: %w", err)
	}
	in := &VisionInput{Graph: g, Weights: w, Family: arch.Qwen2VLVisionFamily, Config: cfg, Markers: markers, Weights8: weights == VisionW8, WeightsF16: weights == VisionF16}
	for _, b := range buckets {
		in.Sizes = append(in.Sizes, VisionSize{Height: b.H, Width: b.W, Rows: (b.H / v.PatchSize) * (b.W / v.PatchSize)})
	}
	return in, nil
}
