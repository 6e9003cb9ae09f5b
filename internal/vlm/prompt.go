package vlm

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/aotlm/aotlm"
	"github.com/aotlm/aotlm/internal/vision"
)

// Prompter builds prompts that hold images for the runtime's sessions:
// each image is encoded once, and its layout (marker tokens, and one
// aotlm.EmbedBase id per embedding row, at the rotary positions the
// family gives its rows) goes where the text holds the image's
// placeholder. The ids of an image's rows depend on its file's
// bytes only, so a session that holds a conversation with an image reuses
// its cache past the image on the next turn. It is safe for concurrent
// use; the encoder runs one image at a time.
type Prompter struct {
	vm    PlacingEncoder
	tm    *aotlm.Model
	width int

	mu     sync.Mutex // held while encoding
	recent []*encoded // the last images encoded, newest last
	// Encoded counts images encoded and EncodeTime sums their time
	// (decoding, preprocessing and the encoder), under mu.
	encodedN   int
	encodeTime time.Duration
}

// encoded is an image's layout and rows, by the digest of its file.
type encoded struct {
	key   [32]byte
	ids   []int     // the layout, -1 at embedding rows
	rows  []float32 // the embedding rows, in order
	pos   []int     // the rows' relative rotary positions (Placed.Pos), or nil
	comps int       // position components a row of pos carries
}

// keepRecent is how many encoded images a Prompter keeps, so that a
// client sending the same image every turn does not encode it again.
const keepRecent = 8

// Encoder turns an image into its embedding rows: the interpreter's
// Model or an artifact's compiled encoder.
type Encoder interface {
	Encode(img *vision.RGB) (*Image, error)
}

// PlacingEncoder is an Encoder that also lays its images out for a prompt
// as its family does (Model, CompiledEncoder); piece looks marker pieces
// up in the vocabulary.
type PlacingEncoder interface {
	Encoder
	Place(img *Image, piece func(string) (int, bool)) (*Placed, error)
}

// NewPrompter makes a prompter over the vision encoder enc, whose rows are
// width wide, and the compiled text model tm (its tokenizer places the
// markers).
func NewPrompter(enc PlacingEncoder, width int, tm *aotlm.Model) *Prompter {
	return &Prompter{vm: enc, tm: tm, width: width}
}

// Limits are the decoding limits of the images a prompter accepts.
var Limits = vision.DefaultLimits

// encode returns the layout of an image file's bytes, encoding it unless
// it is one of the recent ones.
func (p *Prompter) encode(data []byte) (*encoded, error) {
	key := sha256.Sum256(data)
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, e := range p.recent {
		if e.key == key {
			return e, nil
		}
	}
	start := time.Now()
	img, err := vision.Decode(data, Limits)
	if err != nil {
		return nil, err
	}
	enc, err := p.vm.Encode(img)
	if err != nil {
		return nil, err
	}
	e, err := p.keep(key, enc)
	if err != nil {
		return nil, err
	}
	p.encodedN++
	p.encodeTime += time.Since(start)
	return e, nil
}

// keep lays an encoded image out and keeps it among the recent ones;
// p.mu is held.
func (p *Prompter) keep(key [32]byte, enc *Image) (*encoded, error) {
	e := &encoded{key: key}
	placed, err := p.vm.Place(enc, p.piece)
	if err != nil {
		return nil, err
	}
	n := len(placed.Rows) / p.width
	if n == 0 || len(placed.Rows) != n*p.width {
		return nil, fmt.Errorf("vlm: an image laid out as %d values, not rows of %d", len(placed.Rows), p.width)
	}
	e.ids, e.rows, e.pos = placed.IDs, placed.Rows, placed.Pos
	if e.pos != nil {
		e.comps = len(e.pos) / n
	}
	if len(p.recent) == keepRecent {
		p.recent = p.recent[1:]
	}
	p.recent = append(p.recent, e)
	return e, nil
}

// EncodeStats returns how many images the prompter encoded and the time
// it spent on them (decoding, preprocessing and the encoder).
func (p *Prompter) EncodeStats() (int, time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.encodedN, p.encodeTime
}

// piece looks a marker up in the vocabulary.
func (p *Prompter) piece(s string) (int, bool) {
	ids, err := p.tm.Encode(s, true)
	if err != nil || len(ids) != 1 {
		return 0, false
	}
	return ids[0], true
}

// Images are the images of one prompt or conversation and their rows.
type Images struct {
	p       *Prompter
	embeds  *aotlm.Embeds
	layouts map[string][]int // placeholder -> layout ids
}

// NewImages starts the images of a prompt or conversation.
func (p *Prompter) NewImages() *Images {
	return &Images{p: p, embeds: aotlm.NewEmbeds(p.width), layouts: map[string][]int{}}
}

// Embeds holds the rows the ids of Encode name: give it to the requests
// (aotlm.Request.Embeds).
func (im *Images) Embeds() *aotlm.Embeds { return im.embeds }

// placeholder matches the text that stands for an image in a prompt.
var placeholder = regexp.MustCompile(`<__image_[0-9a-f]{16}__>`)

// Add decodes and encodes an image file's bytes (JPEG, PNG, GIF, WebP)
// and returns the placeholder to write where the image goes in a message.
func (im *Images) Add(data []byte) (string, error) {
	e, err := im.p.encode(data)
	if err != nil {
		return "", err
	}
	return im.add(e)
}

// AddEncoded is Add for an image file's bytes already encoded (by the
// prompter's model) as enc.
func (im *Images) AddEncoded(data []byte, enc *Image) (string, error) {
	im.p.mu.Lock()
	e, err := im.p.keep(sha256.Sum256(data), enc)
	im.p.mu.Unlock()
	if err != nil {
		return "", err
	}
	return im.add(e)
}

func (im *Images) add(e *encoded) (string, error) {
	rowIDs, err := im.embeds.AddAt(e.key, e.rows, e.pos, e.comps)
	if err != nil {
		return "", err
	}
	ids := make([]int, len(e.ids))
	k := 0
	for i, id := range e.ids {
		if id == -1 {
			id = rowIDs[k]
			k++
		}
		ids[i] = id
	}
	name := "<__image_" + hex.EncodeToString(e.key[:8]) + "__>"
	im.layouts[name] = ids
	return name, nil
}

// Encode encodes a rendered prompt with no special tokens added, each
// placeholder of Add replaced by its image's layout (the text between
// them is tokenized piece by piece).
func (im *Images) Encode(text string) ([]int, error) {
	var ids []int
	at := 0
	for _, loc := range placeholder.FindAllStringIndex(text, -1) {
		layout, ok := im.layouts[text[loc[0]:loc[1]]]
		if !ok {
			continue // text that looks like a placeholder of no image
		}
		if loc[0] > at {
			part, err := im.p.tm.Encode(text[at:loc[0]], true)
			if err != nil {
				return nil, err
			}
			ids = append(ids, part...)
		}
		ids = append(ids, layout...)
		at = loc[1]
	}
	if at < len(text) {
		part, err := im.p.tm.Encode(text[at:], true)
		if err != nil {
			return nil, err
		}
		ids = append(ids, part...)
	}
	return ids, nil
}

// Place writes the placeholders of a message's images into its text as
// run does with <image> markers: the text's markers, in order, when it
// has one per image, else all before the text.
func Place(text string, placeholders []string) (string, error) {
	c := strings.Count(text, ImageTok)
	switch {
	case len(placeholders) == 0:
		return text, nil
	case c == 0:
		return strings.Join(placeholders, "") + text, nil
	case c != len(placeholders):
		return "", fmt.Errorf("the message has %d %s markers for %d images", c, ImageTok, len(placeholders))
	}
	var b strings.Builder
	for _, p := range placeholders {
		before, after, _ := strings.Cut(text, ImageTok)
		b.WriteString(before + p)
		text = after
	}
	return b.String() + text, nil
}
