package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/aotlm/aotlm"
	"github.com/aotlm/aotlm/internal/modelparts"
	"github.com/aotlm/aotlm/internal/vision"
	"github.com/aotlm/aotlm/internal/visionload"
	"github.com/aotlm/aotlm/internal/vlm"
	"github.com/aotlm/aotlm/serve"
)

// openPrompter opens the vision encoder of a vision-language model for
// prompts with images over the compiled text model m (visionload.Open, an
// image no compiled size holds going to the source model as for run
// --image). It returns nil when the model has none.
func openPrompter(modelPath, mmproj string, m *aotlm.Model, threads int) (*vlm.Prompter, error) {
	enc, err := visionload.Open(visionload.Source{Model: m, Path: modelPath, MMProj: mmproj, Threads: threads, Fallback: true})
	switch {
	case errors.Is(err, visionload.ErrNoEncoder):
		return nil, nil
	case err != nil:
		return nil, err
	case modelparts.Engine(m) == nil:
		return nil, fmt.Errorf("images need the compiled text model; drop --no-compile")
	}
	return enc.Prompter(m), nil
}

// readImage reads an image file within the decoding limits.
func readImage(path string) ([]byte, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if lim := vision.DefaultLimits.MaxBytes; lim > 0 && st.Size() > lim {
		return nil, fmt.Errorf("%s: file of %d bytes is over the %d-byte limit for images", path, st.Size(), lim)
	}
	return os.ReadFile(path)
}

// chatImages is chat's /image state: the conversation's images and those
// attached to the next user turn.
type chatImages struct {
	p       *vlm.Prompter
	cur     *vlm.Images
	pending []string // placeholders for the next turn
}

func newChatImages(p *vlm.Prompter) *chatImages {
	return &chatImages{p: p, cur: p.NewImages()}
}

// encode is the chat's ChatOptions.Encode.
func (ci *chatImages) encode(text string) ([]int, error) { return ci.cur.Encode(text) }

// attach encodes an image for the next user turn.
func (ci *chatImages) attach(path string) error {
	data, err := readImage(path)
	if err != nil {
		return err
	}
	ph, err := ci.cur.Add(data)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	ci.pending = append(ci.pending, ph)
	return nil
}

// message places the pending images in a user turn's text.
func (ci *chatImages) message(text string) (string, error) {
	out, err := vlm.Place(text, ci.pending)
	if err != nil {
		return "", err
	}
	ci.pending = nil
	return out, nil
}

// reset forgets the conversation's images.
func (ci *chatImages) reset() {
	ci.cur, ci.pending = ci.p.NewImages(), nil
}

// attachImage runs chat's /image command, noting what happened on errw.
func attachImage(errw io.Writer, images *chatImages, path string) {
	switch {
	case images == nil:
		fmt.Fprintln(errw, "(/image needs a vision-language model: a SmolVLM or Qwen2-VL folder or artifact, or a text GGUF with --mmproj)")
	case path == "":
		fmt.Fprintln(errw, "(/image FILE: name an image file)")
	default:
		if err := images.attach(path); err != nil {
			fmt.Fprintf(errw, "(image not attached: %v)\n", err)
			return
		}
		fmt.Fprintf(errw, "(image attached to the next message: %s)\n", path)
	}
}

// servePrompts gives the server a prompter's images.
type servePrompts struct{ p *vlm.Prompter }

func (s servePrompts) NewImages() serve.ImagePrompt { return s.p.NewImages() }
