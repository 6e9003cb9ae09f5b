package main

import (
	"fmt"

	"github.com/aotlm/aotlm"
	"github.com/aotlm/aotlm/internal/engine"
	"github.com/aotlm/aotlm/internal/modelparts"
	"github.com/aotlm/aotlm/internal/vision"
	"github.com/aotlm/aotlm/internal/vlm"
)

// imageEncoder turns an image into the embedding rows of its layout.
type imageEncoder interface {
	Encode(img *vision.RGB) (*vlm.Image, error)
}

// openedEncoder is the image encoder run uses, with what placing its
// rows needs.
type openedEncoder struct {
	enc     imageEncoder
	imageID int // -1: look the image token up
	width   int // the text model's embedding width
	piece   func(string) (int, bool)
	close   func()
	// place lays an encoded image out for the prompt (markers, rows and,
	// for M-RoPE families, the rows' positions).
	place func(img *vlm.Image) (*vlm.Placed, error)
	// interp is the interpreter's model when the encoder is not compiled
	// (it also runs the text model of a model that is not compiled).
	interp *vlm.Model
}

// openImageEncoder returns the vision plan of m's artifact when it has
// one (nothing but the artifact is read); else the encoder of the model
// folder or the mmproj file, run by the graph interpreter. piece looks
// marker pieces up in the vocabulary.
func openImageEncoder(m *aotlm.Model, r imageRun, piece func(string) (int, bool)) (*openedEncoder, error) {
	if eng := modelparts.Engine(m); eng != nil && vlm.IsCompiledQwen2VL(eng) {
		return openCompiledQwen2VL(eng, r, piece)
	}
	if eng := modelparts.Engine(m); eng != nil && vlm.HasVision(eng) {
		c, err := vlm.OpenCompiled(eng, r.threads)
		if err != nil {
			return nil, err
		}
		look := func(s string) (int, bool) {
			if id, ok := c.Piece(s); ok {
				return id, true
			}
			return piece(s)
		}
		oe := &openedEncoder{enc: c, imageID: c.Vision.ImageTokenID, width: c.Vision.TextHidden, piece: look, close: c.Close}
		if oe.imageID < 0 {
			id, ok := look(vlm.ImageTok)
			if !ok {
				c.Close()
				return nil, fmt.Errorf("the vocabulary has no %s token", vlm.ImageTok)
			}
			oe.imageID = id
		}
		oe.place = func(img *vlm.Image) (*vlm.Placed, error) {
			ids, rows, err := vlm.Layout(img, oe.width, look)
			if err != nil {
				return nil, err
			}
			var kept []float32
			for j, id := range ids {
				if id == -1 {
					kept = append(kept, rows[j*oe.width:(j+1)*oe.width]...)
				}
			}
			return &vlm.Placed{IDs: ids, Rows: kept}, nil
		}
		return oe, nil
	}
	vm, err := openInterpreterVLM(r)
	if err != nil {
		return nil, err
	}
	imageID, err := vm.ImageTokenID(piece)
	if err != nil {
		return nil, err
	}
	return &openedEncoder{enc: vm, imageID: imageID, width: vm.TextConfig().Hidden, piece: piece, close: func() {}, interp: vm,
		place: func(img *vlm.Image) (*vlm.Placed, error) { return vm.Place(img, piece) }}, nil
}

// openInterpreterVLM opens the model folder or the text GGUF and its
// mmproj file for the graph interpreter.
func openInterpreterVLM(r imageRun) (*vlm.Model, error) {
	switch {
	case r.images.mmproj != "":
		return vlm.OpenPair(r.modelPath, r.images.mmproj, r.threads)
	case vlm.IsVLM(r.modelPath):
		return vlm.Open(r.modelPath, r.threads)
	}
	return nil, fmt.Errorf("--image needs a vision-language model: an artifact compiled with its vision encoder, a SmolVLM, Qwen2-VL or Qwen2.5-VL folder (Hugging Face layout), or a text GGUF with --mmproj; %s is none of them", r.modelPath)
}

// openCompiledQwen2VL returns the Qwen2-VL vision plans of eng's artifact.
// An image no plan's size holds goes to the interpreter when the source
// model is at hand (run -m FOLDER, or a text GGUF with --mmproj), else it
// is scaled down to fit a size (vlm.CompiledQwen2VL).
func openCompiledQwen2VL(eng *engine.Engine, r imageRun, piece func(string) (int, bool)) (*openedEncoder, error) {
	c, err := vlm.OpenCompiledQwen2VL(eng, r.threads)
	if err != nil {
		return nil, err
	}
	imageID, err := c.ImageTokenID(piece)
	if err != nil {
		c.Close()
		return nil, err
	}
	if r.images.mmproj != "" || vlm.IsVLM(r.modelPath) {
		c.Fallback = &lazyInterpreter{r: r}
	}
	return &openedEncoder{enc: c, imageID: imageID, width: c.Vision.TextHidden, piece: piece, close: c.Close,
		place: func(img *vlm.Image) (*vlm.Placed, error) { return c.Place(img, piece) }}, nil
}

// lazyInterpreter opens the source model's encoder in the graph
// interpreter when an image first needs it.
type lazyInterpreter struct {
	r  imageRun
	vm *vlm.Model
}

func (l *lazyInterpreter) Encode(img *vision.RGB) (*vlm.Image, error) {
	if l.vm == nil {
		vm, err := openInterpreterVLM(l.r)
		if err != nil {
			return nil, fmt.Errorf("no compiled image size holds the image, and the source model: %w", err)
		}
		l.vm = vm
	}
	return l.vm.Encode(img)
}

// newImageSequence returns a sequence of n positions of the text model
// (the artifact's engine, else the interpreter) that places the images'
// rows at the imageID rows, at their rotary positions.
func newImageSequence(m *aotlm.Model, oe *openedEncoder, imageID int, placed []*vlm.Placed, n int) (aotlm.Sequence, error) {
	eng := modelparts.Engine(m)
	if eng == nil {
		q := oe.interp.NewSequence(n, imageID)
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
	q := vlm.NewImageSequence(s, imageID, oe.width)
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
