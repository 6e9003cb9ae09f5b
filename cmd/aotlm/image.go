package main

import (
	"errors"
	"fmt"

	"github.com/spf13/pflag"

	"github.com/aotlm/aotlm"
	"github.com/aotlm/aotlm/internal/visionload"
)

// imageFlags are run's image flags.
type imageFlags struct {
	files         []string
	mmproj        string
	visionWeights string
	visionBuckets string
}

// addImageFlags adds run's --image and --mmproj flags.
func addImageFlags(f *pflag.FlagSet) *imageFlags {
	var fl imageFlags
	f.StringArrayVar(&fl.files, "image", nil, "an image (JPEG, PNG, GIF, WebP) for a vision-language model (repeatable); "+
		"each goes where the prompt writes <image>, else before the prompt")
	f.StringVar(&fl.mmproj, "mmproj", "", "llama.cpp's vision GGUF (mmproj) for a text GGUF given with -m, with --image")
	f.StringVar(&fl.visionWeights, "vision-weights", "", visionWeightsHelp)
	f.StringVar(&fl.visionBuckets, "vision-buckets", "", visionBucketsHelp)
	return &fl
}

// encode encodes the --image files with the artifact's vision plan (or,
// when the model is not compiled, the encoder of its folder or mmproj
// file through the graph interpreter) and marks their places in req's
// prompt. It returns the model whose sessions place the images' rows
// (m itself without --image) and the images (nil without --image).
func (fl *imageFlags) encode(m *aotlm.Model, mf *modelFlags, req *aotlm.Request) (*aotlm.Model, *visionload.PromptImages, error) {
	if len(fl.files) == 0 {
		return m, nil, nil
	}
	enc, err := visionload.Open(visionload.Source{Model: m, Path: mf.path, MMProj: fl.mmproj, Threads: mf.threads, Fallback: true, LlamaCpp: mf.visionLlamaCpp})
	if errors.Is(err, visionload.ErrNoEncoder) {
		return nil, nil, fmt.Errorf("--image needs a vision-language model: an artifact compiled with its vision encoder, a vision-language folder (Hugging Face layout), or a text GGUF with --mmproj; %s is none of them", mf.path)
	}
	if err != nil {
		return nil, nil, err
	}
	images, err := visionload.EncodeFiles(m, enc, fl.files)
	if err != nil {
		return nil, nil, err
	}
	gen, err := images.Model()
	if err == nil {
		req.Prompt, err = images.Mark(req.Prompt)
	}
	if err != nil {
		images.Close()
		return nil, nil, err
	}
	return gen, images, nil
}
