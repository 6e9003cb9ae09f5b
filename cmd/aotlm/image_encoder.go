package main

import (
	"errors"
	"fmt"

	"github.com/aotlm/aotlm"
	"github.com/aotlm/aotlm/internal/visionload"
	"github.com/aotlm/aotlm/internal/vlm"
)

// openImageEncoder opens m's vision encoder for run --image
// (visionload.Open: the artifact's vision plans, else the model folder's
// or the mmproj file's encoder in the graph interpreter) and the id the
// prompt holds at each image row; piece looks marker pieces up in the
// vocabulary.
func openImageEncoder(m *aotlm.Model, r imageRun, piece func(string) (int, bool)) (*visionload.Encoder, int, error) {
	enc, err := visionload.Open(visionload.Source{Model: m, Path: r.modelPath, MMProj: r.images.mmproj, Threads: r.threads, Fallback: true})
	if errors.Is(err, visionload.ErrNoEncoder) {
		return nil, 0, fmt.Errorf("--image needs a vision-language model: an artifact compiled with its vision encoder, a SmolVLM, Qwen2-VL or Qwen2.5-VL folder (Hugging Face layout), or a text GGUF with --mmproj; %s is none of them", r.modelPath)
	}
	if err != nil {
		return nil, 0, err
	}
	imageID, err := enc.ImageTokenID(piece)
	if err != nil {
		enc.Close()
		return nil, 0, err
	}
	return enc, imageID, nil
}

// newImageSequence is enc.NewSequence, its refusal worded for run's
// flags.
func newImageSequence(m *aotlm.Model, enc *visionload.Encoder, imageID int, placed []*vlm.Placed, n int) (aotlm.Sequence, error) {
	q, err := enc.NewSequence(m, imageID, placed, n)
	if errors.Is(err, visionload.ErrPositionsNeedEngine) {
		return nil, fmt.Errorf("%w; drop --no-compile", err)
	}
	return q, err
}

const visionBucketsHelp = "image sizes HxW in pixels, comma-separated, a Qwen2-VL or Qwen2.5-VL encoder is compiled for, one vision plan each " +
	"(default: square, 3:4, 4:3, 9:16 and 16:9 sizes of 64 to 576 image tokens)"
