package vlm

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/aotlm/aotlm/internal/arch"
	"github.com/aotlm/aotlm/internal/engine"
	"github.com/aotlm/aotlm/internal/plan"
	"github.com/aotlm/aotlm/internal/vision"
)

// CompiledQwen2VL is the image half of a Qwen2-VL artifact: one vision
// plan per image size (bucket), run by the engine, with the preprocessing
// and the prompt markers its manifest carries.
//
// An image encodes in the bucket of least area holding its smart-resized
// size (vision.Qwen2VL.Fit), resized into it keeping its aspect ratio and
// centered on black as mtmd letterboxes; when its smart-resized size is a
// bucket, its embeddings are those of the interpreter (and llama.cpp).
// When no bucket holds that size, Fallback encodes it if set (the source
// model in the interpreter); else the image is scaled down into the
// bucket it stays largest in (vision.Qwen2VL.FitShrunk), and refused when
// its short side would be under patch x merge pixels even there.
type CompiledQwen2VL struct {
	Vision  arch.Qwen2VLVision
	Proc    vision.Qwen2VL
	Buckets []vision.Bucket
	Markers map[string]int
	// Fallback, when set, encodes the images no bucket holds.
	Fallback Encoder
	e        *engine.Engine
	threads  int
	encs     map[vision.Bucket]*engine.Encoder // opened on first use
}

// OpenCompiledQwen2VL prepares the vision plans of e's artifact (a
// Qwen2-VL encoder) to run with up to threads workers.
func OpenCompiledQwen2VL(e *engine.Engine, threads int) (*CompiledQwen2VL, error) {
	mv := e.Manifest().Vision
	if mv == nil || mv.Family != arch.Qwen2VLVisionFamily {
		return nil, errors.New("vlm: the artifact has no Qwen2-VL vision encoder")
	}
	var cfg arch.Qwen2VLArtifact
	if err := json.Unmarshal(mv.Config, &cfg); err != nil {
		return nil, fmt.Errorf("vlm: the artifact's vision config: %w", err)
	}
	vc := cfg.Qwen2VLVision
	if err := vc.Validate(); err != nil {
		return nil, fmt.Errorf("vlm: the artifact's vision config: %w", err)
	}
	proc := vision.Qwen2VL{Align: vc.PatchSize * vc.Merge, MinPixels: cfg.MinPixels, MaxPixels: cfg.MaxPixels}
	if proc.MinPixels <= 0 || proc.MaxPixels < proc.MinPixels {
		return nil, fmt.Errorf("vlm: the artifact's vision config: min pixels %d, max pixels %d", proc.MinPixels, proc.MaxPixels)
	}
	c := &CompiledQwen2VL{Vision: vc, Proc: proc, Markers: mv.Markers, e: e, threads: threads, encs: map[vision.Bucket]*engine.Encoder{}}
	for _, r := range mv.Plans {
		b := vision.Bucket{W: r.Width, H: r.Height}
		if err := b.Check(proc.Align); err != nil {
			return nil, fmt.Errorf("vlm: vision plan %s: %w", r.Name, err)
		}
		c.Buckets = append(c.Buckets, b)
	}
	return c, nil
}

// Bucket returns the bucket an image of w x h encodes in, and whether it
// was scaled down to fit (the second rule of CompiledQwen2VL).
func (c *CompiledQwen2VL) Bucket(w, h int) (b vision.Bucket, shrunk bool, err error) {
	if b, ok := c.Proc.Fit(w, h, c.Buckets); ok {
		return b, false, nil
	}
	if b, ok := c.Proc.FitShrunk(w, h, c.Buckets); ok {
		return b, true, nil
	}
	sw, sh := c.Proc.Size(w, h)
	return vision.Bucket{}, false, fmt.Errorf("vlm: no compiled image size holds a %dx%d image (smart-resized to %dx%d, HxW), even scaled down to fit; the artifact has %s",
		h, w, sh, sw, c.sizes())
}

// sizes lists the buckets as HxW.
func (c *CompiledQwen2VL) sizes() string {
	var s []string
	for _, b := range c.Buckets {
		s = append(s, b.String())
	}
	return strings.Join(s, ", ")
}

// Encode preprocesses and encodes an image: one chunk of Rows x Cols
// merged-patch embedding rows (the bucket's grid).
func (c *CompiledQwen2VL) Encode(img *vision.RGB) (*Image, error) {
	if _, ok := c.Proc.Fit(img.W, img.H, c.Buckets); !ok && c.Fallback != nil {
		return c.Fallback.Encode(img)
	}
	b, _, err := c.Bucket(img.W, img.H)
	if err != nil {
		return nil, err
	}
	return c.EncodeIn(img, b)
}

// EncodeIn encodes img resized into bucket b.
func (c *CompiledQwen2VL) EncodeIn(img *vision.RGB, b vision.Bucket) (*Image, error) {
	vc := &c.Vision
	p, err := c.Proc.PreprocessBucket(img, b)
	if err != nil {
		return nil, err
	}
	rows, pos, gr, gc, err := vc.Patches(vision.Normalize(p, vc.Mean, vc.Std), p.W, p.H)
	if err != nil {
		return nil, err
	}
	enc, err := c.encoder(b)
	if err != nil {
		return nil, err
	}
	T := len(pos) / 2
	if r, cols := enc.Output(); enc.Rows() != T || enc.InputCols() != vc.PatchCols() || enc.PosComponents() != 2 ||
		r != gr*gc || cols != vc.TextHidden {
		return nil, fmt.Errorf("vlm: vision plan %s reads %d rows of %d (%d position components) and writes %dx%d; its config needs %d of %d (2) and %dx%d",
			plan.VisionPlanName(b.H, b.W), enc.Rows(), enc.InputCols(), enc.PosComponents(), r, cols, T, vc.PatchCols(), gr*gc, vc.TextHidden)
	}
	out, err := enc.EncodeAt(rows, make([]int, T), pos)
	if err != nil {
		return nil, fmt.Errorf("vision encoder: %w", err)
	}
	return &Image{Rows: gr, Cols: gc, Embeds: append([]float32(nil), out...)}, nil
}

// encoder returns the encoder of bucket b, opening it on first use.
func (c *CompiledQwen2VL) encoder(b vision.Bucket) (*engine.Encoder, error) {
	if enc, ok := c.encs[b]; ok {
		return enc, nil
	}
	enc, err := c.e.NewEncoder(plan.VisionPlanName(b.H, b.W), c.threads)
	if err != nil {
		return nil, err
	}
	c.encs[b] = enc
	return enc, nil
}

// Place lays img out as mtmd does for Qwen2-VL (see qwen2vl.Place):
// piece looks up the markers the artifact did not record.
func (c *CompiledQwen2VL) Place(img *Image, piece func(string) (int, bool)) (*Placed, error) {
	return (&qwen2vl{}).Place(img, c.Vision.TextHidden, c.piece(piece))
}

// piece looks a marker up in the artifact's markers, then with look.
func (c *CompiledQwen2VL) piece(look func(string) (int, bool)) func(string) (int, bool) {
	return func(s string) (int, bool) {
		if id, ok := c.Markers[s]; ok {
			return id, true
		}
		if look == nil {
			return 0, false
		}
		return look(s)
	}
}

// ImageTokenID is <|image_pad|>'s id: the artifact's, else looked up.
func (c *CompiledQwen2VL) ImageTokenID(look func(string) (int, bool)) (int, error) {
	if c.Vision.ImageTokenID >= 0 {
		return c.Vision.ImageTokenID, nil
	}
	if id, ok := c.piece(look)(ImagePad); ok {
		return id, nil
	}
	return 0, fmt.Errorf("the vocabulary has no %s token", ImagePad)
}

// TextWidth is the width of the embedding rows.
func (c *CompiledQwen2VL) TextWidth() int { return c.Vision.TextHidden }

// Preprocess resizes img into its bucket: one encoder run.
func (c *CompiledQwen2VL) Preprocess(img *vision.RGB) (int, error) {
	b, _, err := c.Bucket(img.W, img.H)
	if err != nil {
		return 0, err
	}
	_, err = c.Proc.PreprocessBucket(img, b)
	return 1, err
}

// SetFallback sets Fallback.
func (c *CompiledQwen2VL) SetFallback(f Encoder) { c.Fallback = f }

// Close releases the encoders.
func (c *CompiledQwen2VL) Close() {
	for _, enc := range c.encs {
		enc.Close()
	}
	c.encs = map[vision.Bucket]*engine.Encoder{}
}
