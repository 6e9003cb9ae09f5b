package main

import (
	"errors"
	"fmt"

	"github.com/aotlm/aotlm"
	"github.com/aotlm/aotlm/internal/engine"
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

// newImageSequence returns a sequence of n positions of the text model
// (the artifact's engine, else the interpreter) that places the images'
// rows at the imageID rows, at their rotary positions.
func newImageSequence(m *aotlm.Model, enc *visionload.Encoder, imageID int, placed []*vlm.Placed, n int) (aotlm.Sequence, error) {
	eng := m.Engine()
	if eng == nil {
		q := enc.Interp.NewSequence(n, imageID)
		for _, p := range placed {
			if p.Pos != nil {
				return nil, fmt.Errorf("images of this family (M-RoPE positions) need the compiled text model; drop --no-compile")
			}
			if err := q.Queue(p.Rows); err != nil {
				return nil, err
			}
		}
		return q, nil
	}
	s, err := eng.NewSession(engine.SessionOptions{Threads: eng.Threads(), Context: n})
	if err != nil {
		return nil, err
	}
	q := vlm.NewImageSequence(s, imageID, enc.Width())
	for _, p := range placed {
		if err := q.QueueImage(p.Rows, p.Pos, p.Span); err != nil {
			s.Close()
			return nil, err
		}
	}
	return q, nil
}

const visionBucketsHelp = "image sizes HxW in pixels, comma-separated, a Qwen2-VL or Qwen2.5-VL encoder is compiled for, one vision plan each " +
	"(default: square, 3:4, 4:3, 9:16 and 16:9 sizes of 64 to 576 image tokens)"
