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
	registerVisionCompiler(arch.Idefics3VisionFamily, &visionCompiler{
		fromHF: func(ck format.Checkpoint, pre map[string]any, _ int, tok tokenizer.Tokenizer, opts Options) (*VisionInput, error) {
			vc, w, err := arch.LoadVisionHF(ck, pre)
			if err != nil {
				return nil, err
			}
			return idefics3Input(vc, w, tok, opts)
		},
		fromMMProj: func(mm format.Checkpoint, textHidden int, tok tokenizer.Tokenizer, opts Options) (*VisionInput, error) {
			vc, w, err := arch.LoadVisionMMProj(mm, textHidden)
			if err != nil {
				return nil, err
			}
			return idefics3Input(vc, w, tok, opts)
		},
	})
}

// idefics3Input makes the VisionInput of a SmolVLM / Idefics3 encoder:
// one plan for its one tile size, the marker ids looked up with tok.
func idefics3Input(vc arch.VisionConfig, w graph.Weights, tok tokenizer.Tokenizer, opts Options) (*VisionInput, error) {
	if opts.VisionBuckets != "" {
		return nil, errors.New("compile: image sizes are for a Qwen2-VL encoder; a SmolVLM encoder has its one tile size")
	}
	weights, err := checkVisionWeights(opts.VisionWeights)
	if err != nil {
		return nil, err
	}
	g, err := arch.BuildVision(&vc)
	if err != nil {
		return nil, err
	}
	markers := markerIDs(tok, vc.MarkerPieces())
	if vc.ImageTokenID < 0 {
		if id, ok := markers["<image>"]; ok {
			vc.ImageTokenID = id
		}
	}
	cfg, err := json.Marshal(vc)
	if err != nil {
		return nil, fmt.Errorf("compile: vision config: %w", err)
	}
	n := vc.Grid() * vc.Grid()
	return &VisionInput{Graph: g, Weights: w, Family: arch.Idefics3VisionFamily, Config: cfg, Markers: markers,
		Sizes:    []VisionSize{{Height: vc.ImageSize, Width: vc.ImageSize, Rows: n}},
		Weights8: weights == VisionW8, WeightsF16: weights == VisionF16}, nil
}
