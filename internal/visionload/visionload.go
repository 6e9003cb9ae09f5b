// Package visionload chooses and opens the vision encoder of a
// vision-language model, for every command that reads images: the
// artifact's compiled vision plans when it has them, else the encoder of
// the model's Hugging Face folder or of llama.cpp's mmproj GGUF in the
// graph interpreter. It also carries images through the encoder for
// them: a prompt's images, a chat's and a server's, and the timing of
// one image. The family of the encoder is the vlm registry's business.
package visionload

import (
	"errors"
	"fmt"

	"github.com/aotlm/aotlm"
	"github.com/aotlm/aotlm/internal/engine"
	"github.com/aotlm/aotlm/internal/modelparts"
	"github.com/aotlm/aotlm/internal/vision"
	"github.com/aotlm/aotlm/internal/vlm"
)

// ErrNoEncoder is returned, wrapped, when the model has no vision encoder
// at any source.
var ErrNoEncoder = errors.New("no vision encoder")

// ErrPositionsNeedEngine refuses images whose rows sit at rotary
// positions of their own (M-RoPE) over a text model that is not
// compiled: the interpreter's sequence places rows at consecutive
// positions only.
var ErrPositionsNeedEngine = errors.New("images of this family (M-RoPE positions) need the compiled text model")

// Source names where a model's vision encoder may come from.
type Source struct {
	// Model is the opened text model: its artifact's vision plans come
	// first.
	Model *aotlm.Model
	// Path is the model as given: a Hugging Face folder, or a text GGUF
	// with MMProj.
	Path string
	// MMProj is llama.cpp's vision GGUF (mmproj) for a text GGUF.
	MMProj string
	// Threads bounds the encoder's workers.
	Threads int
	// Fallback sends an image no compiled size holds to the source
	// model's encoder in the interpreter, when Path or MMProj name one,
	// so that it encodes as the source model does; without it the
	// compiled encoder scales such an image down to fit.
	Fallback bool
	// LlamaCpp follows llama.cpp's mtmd in the source model's encoder
	// where the family keeps both choices (vlm.Options.LlamaCpp); an
	// artifact's encoder follows what it was compiled with.
	LlamaCpp bool
}

// Where says which implementation encodes the images.
type Where int

const (
	// Artifact is the artifact's compiled vision plans, run by the engine.
	Artifact Where = iota
	// Interpreter is the source model's encoder in the graph interpreter
	// (float32).
	Interpreter
)

// Encoder is a model's vision encoder, from whichever source.
type Encoder struct {
	Where Where
	// Plans is the number of compiled vision plans (Artifact).
	Plans int
	// Interp is the interpreter's model (Interpreter): it can also run
	// the text model of a model that is not compiled.
	Interp *vlm.Model

	compiled vlm.CompiledEncoder
}

// Open returns the vision encoder of src's model: the artifact's vision
// plans when it has them (nothing but the artifact is read), else the
// encoder of src.MMProj or of the folder src.Path. It returns an error
// wrapping ErrNoEncoder when there is none.
func Open(src Source) (*Encoder, error) {
	if src.Model == nil {
		return nil, errors.New("visionload: no model to open the vision encoder of")
	}
	if eng := modelparts.Engine(src.Model); eng != nil && vlm.ArtifactFamily(eng) != "" {
		c, err := vlm.OpenArtifact(eng, src.Threads)
		if err != nil {
			return nil, err
		}
		if src.Fallback && hasSource(src) {
			c.SetFallback(&lazyInterpreter{src: src})
		}
		return &Encoder{Where: Artifact, Plans: len(eng.VisionPlans()), compiled: c}, nil
	}
	vm, err := openInterpreter(src)
	if err != nil {
		return nil, err
	}
	return &Encoder{Where: Interpreter, Interp: vm}, nil
}

// hasSource reports whether src names a source model besides the
// artifact.
func hasSource(src Source) bool { return src.MMProj != "" || vlm.IsVLM(src.Path) }

// openInterpreter opens the text GGUF and its mmproj file, or the model
// folder, for the graph interpreter.
func openInterpreter(src Source) (*vlm.Model, error) {
	switch {
	case src.MMProj != "":
		return vlm.OpenPairWith(src.Path, src.MMProj, src.Threads, vlm.Options{LlamaCpp: src.LlamaCpp})
	case vlm.IsVLM(src.Path):
		return vlm.OpenWith(src.Path, src.Threads, vlm.Options{LlamaCpp: src.LlamaCpp})
	}
	return nil, fmt.Errorf("%s: %w", src.Path, ErrNoEncoder)
}

// encoder is the value that encodes.
func (e *Encoder) encoder() vlm.PlacingEncoder {
	if e.compiled != nil {
		return e.compiled
	}
	return e.Interp
}

// Encode preprocesses and encodes an image.
func (e *Encoder) Encode(img *vision.RGB) (*vlm.Image, error) { return e.encoder().Encode(img) }

// Preprocess does the preprocessing of Encode alone and returns how many
// encoder runs the image takes.
func (e *Encoder) Preprocess(img *vision.RGB) (int, error) {
	if e.compiled != nil {
		return e.compiled.Preprocess(img)
	}
	return e.Interp.Preprocess(img)
}

// Width is the text model's embedding width, the width of the rows.
func (e *Encoder) Width() int {
	if e.compiled != nil {
		return e.compiled.TextWidth()
	}
	return e.Interp.TextConfig().Hidden
}

// ImageTokenID is the id the prompt holds at each image row; piece looks
// the family's image piece up in the vocabulary when no source records it.
func (e *Encoder) ImageTokenID(piece func(string) (int, bool)) (int, error) {
	if e.compiled != nil {
		return e.compiled.ImageTokenID(piece)
	}
	return e.Interp.ImageTokenID(piece)
}

// Place lays an encoded image out for a prompt as the family does;
// piece looks up the marker pieces the artifact did not record.
func (e *Encoder) Place(img *vlm.Image, piece func(string) (int, bool)) (*vlm.Placed, error) {
	return e.encoder().Place(img, piece)
}

// Prompter makes a prompter of images over the compiled text model tm.
func (e *Encoder) Prompter(tm *aotlm.Model) *vlm.Prompter {
	return vlm.NewPrompter(e.encoder(), e.Width(), tm)
}

// NewSequence returns a sequence of n positions of m's text model (its
// artifact's engine, else the interpreter's model) that places the rows
// of the placed images at the imageID rows, at their rotary positions.
func (e *Encoder) NewSequence(m *aotlm.Model, imageID int, placed []*vlm.Placed, n int) (aotlm.Sequence, error) {
	eng := modelparts.Engine(m)
	if eng == nil {
		if e.Interp == nil {
			return nil, errors.New("visionload: a text model with no engine needs the interpreter's encoder")
		}
		q := e.Interp.NewSequence(n, imageID)
		for _, p := range placed {
			if p.Pos != nil {
				return nil, ErrPositionsNeedEngine
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
	q := vlm.NewImageSequence(s, imageID, e.Width())
	for _, p := range placed {
		if err := q.QueueImage(p.Rows, p.Pos, p.Span); err != nil {
			s.Close()
			return nil, err
		}
	}
	return q, nil
}

// Close releases the compiled encoder; the interpreter's model holds
// nothing to release.
func (e *Encoder) Close() {
	if e.compiled != nil {
		e.compiled.Close()
	}
}

// lazyInterpreter opens the source model's encoder in the graph
// interpreter when an image first needs it.
type lazyInterpreter struct {
	src Source
	vm  *vlm.Model
}

func (l *lazyInterpreter) Encode(img *vision.RGB) (*vlm.Image, error) {
	if l.vm == nil {
		vm, err := openInterpreter(l.src)
		if err != nil {
			return nil, fmt.Errorf("no compiled image size holds the image, and the source model: %w", err)
		}
		l.vm = vm
	}
	return l.vm.Encode(img)
}
