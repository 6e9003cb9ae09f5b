package visionload

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aotlm/aotlm/internal/userfile"
	"github.com/aotlm/aotlm/serve"

	"github.com/aotlm/aotlm"
	"github.com/aotlm/aotlm/internal/modelparts"
	"github.com/aotlm/aotlm/internal/vision"
	"github.com/aotlm/aotlm/internal/vlm"
)

// ErrPromptsNeedEngine refuses chat and server images over a text model
// that is not compiled: their rows go to the engine's sessions.
var ErrPromptsNeedEngine = errors.New("images need the compiled text model")

// ReadImage reads an image file within the decoding limits.
func ReadImage(path string) ([]byte, error) {
	return userfile.ReadFile(path, userfile.Image.Limit(vision.DefaultLimits.MaxBytes))
}

// pieceOf looks a marker piece up in m's vocabulary: the piece's one id.
func pieceOf(m *aotlm.Model) func(string) (int, bool) {
	return func(s string) (int, bool) {
		ids, err := m.Encode(s, true)
		if err != nil || len(ids) != 1 {
			return 0, false
		}
		return ids[0], true
	}
}

// PromptImages are the images of one prompt over a text model, encoded,
// and the layout that places their rows in the prompt's ids.
type PromptImages struct {
	enc     *Encoder
	m       *aotlm.Model
	imageID int
	encoded []*vlm.Image
	placed  []*vlm.Placed
	// EncodeTime is the time decoding and encoding the files took.
	EncodeTime time.Duration
}

// EncodeFiles decodes and encodes the image files with enc for a prompt
// over the text model m. The images own enc from then on: Close closes it,
// and so does an error.
func EncodeFiles(m *aotlm.Model, enc *Encoder, files []string) (_ *PromptImages, err error) {
	defer func() {
		if err != nil {
			enc.Close()
		}
	}()
	imageID, err := enc.ImageTokenID(pieceOf(m))
	if err != nil {
		return nil, err
	}
	r := &PromptImages{enc: enc, m: m, imageID: imageID}
	start := time.Now()
	for _, path := range files {
		img, err := vision.DecodeFile(path, vision.DefaultLimits)
		if err != nil {
			return nil, err
		}
		e, err := enc.Encode(img)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		r.encoded = append(r.encoded, e)
	}
	r.EncodeTime = time.Since(start)
	return r, nil
}

// Len is the number of images.
func (r *PromptImages) Len() int { return len(r.encoded) }

// Close closes the images' encoder; it does nothing on nil.
func (r *PromptImages) Close() {
	if r != nil && r.enc != nil {
		r.enc.Close()
	}
}

// Mark puts one image marker per image before a prompt that holds none,
// and refuses a prompt that holds another number of them.
func (r *PromptImages) Mark(prompt string) (string, error) {
	switch c := strings.Count(prompt, vlm.ImageTok); {
	case c == 0:
		return strings.Repeat(vlm.ImageTok, len(r.encoded)) + prompt, nil
	case c != len(r.encoded):
		return "", fmt.Errorf("the prompt has %d %s markers for %d images", c, vlm.ImageTok, len(r.encoded))
	}
	return prompt, nil
}

// IDs encodes a prompt whose markers stand for the images, in order: the
// text between them through the tokenizer (special tokens read as such
// after the first marker, or throughout when raw), each image as its
// family lays it out, its rows at the image token's id.
func (r *PromptImages) IDs(prompt string, raw bool) ([]int, error) {
	piece := pieceOf(r.m)
	var ids []int
	r.placed = r.placed[:0]
	for i, part := range strings.Split(prompt, vlm.ImageTok) {
		if i > 0 {
			p, err := r.enc.Place(r.encoded[i-1], piece)
			if err != nil {
				return nil, err
			}
			r.placed = append(r.placed, p)
			for _, id := range p.IDs {
				if id == -1 {
					id = r.imageID
				}
				ids = append(ids, id)
			}
		}
		if part == "" && i > 0 {
			continue
		}
		pids, err := r.m.Encode(part, raw || i > 0)
		if err != nil {
			return nil, err
		}
		ids = append(ids, pids...)
	}
	return ids, nil
}

// Model is the text model whose sequences place the rows of the images
// IDs laid out at their rows; a session's error wraps
// ErrPositionsNeedEngine for M-RoPE images over a model not compiled.
func (r *PromptImages) Model() (*aotlm.Model, error) {
	m := r.m
	return aotlm.NewModel(aotlm.Config{Info: m.Info(), Tokenizer: m.Tokenizer(), BOS: m.BOS(), EOS: m.StopIDs(),
		NewSequence: func(n int) (aotlm.Sequence, error) {
			if n <= 0 {
				n = m.Info().Context
			}
			return r.enc.NewSequence(m, r.imageID, r.placed, n)
		}})
}

// Prompts makes the images of prompts over a compiled text model: a
// chat's, a server request's.
type Prompts struct{ p *vlm.Prompter }

// OpenPrompts opens the vision encoder of src's model for prompts with
// images over the compiled text model src.Model (an image no compiled
// size holds going to the source model). It returns nil when the model
// has none, and an error wrapping ErrPromptsNeedEngine when the text
// model is not compiled.
func OpenPrompts(src Source) (*Prompts, error) {
	src.Fallback = true
	enc, err := Open(src)
	switch {
	case errors.Is(err, ErrNoEncoder):
		return nil, nil
	case err != nil:
		return nil, err
	case modelparts.Engine(src.Model) == nil:
		return nil, ErrPromptsNeedEngine
	}
	return &Prompts{enc.Prompter(src.Model)}, nil
}

// NewImages starts the images of one prompt.
func (p *Prompts) NewImages() *vlm.Images { return p.p.NewImages() }

// Chat starts the images of a conversation.
func (p *Prompts) Chat() *ChatImages { return &ChatImages{p: p.p, cur: p.p.NewImages()} }

// ChatImages are a conversation's images and those attached to its next
// user turn.
type ChatImages struct {
	p       *vlm.Prompter
	cur     *vlm.Images
	pending []string // placeholders for the next turn
}

// Encode encodes a rendered conversation, its placeholders replaced by
// their images' ids (aotlm.ChatOptions.Encode).
func (ci *ChatImages) Encode(text string) ([]int, error) { return ci.cur.Encode(text) }

// Embeds holds the rows of the conversation's images.
func (ci *ChatImages) Embeds() *aotlm.Embeds { return ci.cur.Embeds() }

// Attach encodes an image file for the next user turn.
func (ci *ChatImages) Attach(path string) error {
	data, err := ReadImage(path)
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

// Message places the pending images in a user turn's text.
func (ci *ChatImages) Message(text string) (string, error) {
	out, err := vlm.Place(text, ci.pending)
	if err != nil {
		return "", err
	}
	ci.pending = nil
	return out, nil
}

// Reset forgets the conversation's images.
func (ci *ChatImages) Reset() { ci.cur, ci.pending = ci.p.NewImages(), nil }

// ServeImages is the server's source of images (serve.Options.Images)
// over p.
func (p *Prompts) ServeImages() serve.ImagePrompts { return servePrompts{p} }

// servePrompts gives the server a prompter's images.
type servePrompts struct{ p *Prompts }

func (s servePrompts) NewImages() serve.ImagePrompt { return s.p.NewImages() }
