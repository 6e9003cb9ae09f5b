package compile

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/aotlm/aotlm/internal/arch"
	"github.com/aotlm/aotlm/internal/format"
	"github.com/aotlm/aotlm/internal/graph"
	"github.com/aotlm/aotlm/internal/tokenizer"
)

func init() {
	registerVisionCompiler(arch.InternVLVisionFamily, &visionCompiler{
		fromHF: func(ck format.Checkpoint, pre map[string]any, textHidden int, tok tokenizer.Tokenizer, opts Options) (*VisionInput, error) {
			v, w, err := arch.LoadInternVLVisionHF(ck, pre, textHidden)
			if err != nil {
				return nil, err
			}
			return internvlInput(v, w, tok, opts)
		},
		fromMMProj: func(mm format.Checkpoint, textHidden int, tok tokenizer.Tokenizer, opts Options) (*VisionInput, error) {
			v, w, err := arch.LoadInternVLVisionMMProj(mm, textHidden)
			if err != nil {
				return nil, err
			}
			return internvlInput(v, w, tok, opts)
		},
	})
}

// internvlInput makes the VisionInput of an InternVL encoder: one plan
// for its one tile size (the class token's row and the tile's patches),
// the marker ids looked up with tok, opts.VisionLlamaCpp recorded in the
// config.
func internvlInput(v arch.InternVLVision, w graph.Weights, tok tokenizer.Tokenizer, opts Options) (*VisionInput, error) {
	if opts.VisionBuckets != "" {
		return nil, errors.New("compile: image sizes are for a Qwen2-VL encoder; an InternVL encoder has its one tile size")
	}
	weights, err := checkVisionWeights(opts.VisionWeights)
	if err != nil {
		return nil, err
	}
	v.LlamaCpp = opts.VisionLlamaCpp
	g, err := arch.BuildInternVLVision(&v)
	if err != nil {
		return nil, err
	}
	markers := markerIDs(tok, arch.InternVLMarkerPieces)
	if v.ImageTokenID < 0 {
		if id, ok := markers["<IMG_CONTEXT>"]; ok {
			v.ImageTokenID = id
		}
	}
	cfg, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("compile: vision config: %w", err)
	}
	return &VisionInput{Graph: g, Weights: v.EncoderWeights(w), Family: arch.InternVLVisionFamily, Config: cfg, Markers: markers,
		Sizes:    []VisionSize{{Height: v.ImageSize, Width: v.ImageSize, Rows: v.Grid()*v.Grid() + 1}},
		Weights8: weights == VisionW8, WeightsF16: weights == VisionF16}, nil
}
