package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/aotlm/aotlm"
	"github.com/aotlm/aotlm/internal/visionload"
)

// openPrompter opens the vision encoder of a vision-language model for
// prompts with images over the compiled text model m
// (visionload.OpenPrompts). It returns nil when the model has none.
func openPrompter(modelPath, mmproj string, m *aotlm.Model, threads int, llamaCpp bool) (*visionload.Prompts, error) {
	p, err := visionload.OpenPrompts(visionload.Source{Model: m, Path: modelPath, MMProj: mmproj, Threads: threads, LlamaCpp: llamaCpp})
	if errors.Is(err, visionload.ErrPromptsNeedEngine) {
		return nil, fmt.Errorf("%w; drop --no-compile", err)
	}
	return p, err
}

// attachImage runs chat's /image command, noting what happened on errw.
func attachImage(errw io.Writer, images *visionload.ChatImages, path string) {
	switch {
	case images == nil:
		fmt.Fprintln(errw, "(/image needs a vision-language model: a SmolVLM, Qwen2-VL or InternVL folder or artifact, or a text GGUF with --mmproj)")
	case path == "":
		fmt.Fprintln(errw, "(/image FILE: name an image file)")
	default:
		if err := images.Attach(path); err != nil {
			fmt.Fprintf(errw, "(image not attached: %v)\n", err)
			return
		}
		fmt.Fprintf(errw, "(image attached to the next message: %s)\n", path)
	}
}
