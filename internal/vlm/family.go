package vlm

import (
	"errors"
	"fmt"
	"sort"

	"github.com/aotlm/aotlm/internal/arch"
	"github.com/aotlm/aotlm/internal/engine"
	"github.com/aotlm/aotlm/internal/format"
	"github.com/aotlm/aotlm/internal/graph"
	"github.com/aotlm/aotlm/internal/vision"
)

// Family is the runtime of one vision family (arch.VisionFamily, by
// name): how the interpreter loads a model of it from each source and how
// an artifact's compiled encoder of it opens. Each family registers one
// in its own file; nothing outside those files tests which family a model
// is.
type Family struct {
	// Name is the arch.VisionFamily this runs.
	Name string
	// OpenHF loads a Hugging Face checkpoint for the interpreter; pre is
	// its preprocessor_config.json or nil.
	OpenHF func(ck format.Checkpoint, pre map[string]any) (FamilyModel, error)
	// OpenPair loads llama.cpp's text GGUF and mmproj GGUF.
	OpenPair func(text, mmproj format.Checkpoint) (FamilyModel, error)
	// OpenCompiled prepares an artifact's vision plans of the family to
	// run with up to threads workers.
	OpenCompiled func(e *engine.Engine, threads int) (CompiledEncoder, error)
}

// FamilyModel is a model of a family loaded for the interpreter: its
// encoder graph, preprocessing, prompt layout, image token and text
// model.
type FamilyModel interface {
	// Encoder is the vision encoder's graph and weights.
	Encoder() (*graph.Graph, graph.Weights, error)
	// Encode preprocesses img and runs it through enc, an interpreter of
	// Encoder's graph.
	Encode(enc *graph.Interpreter, img *vision.RGB) (*Image, error)
	// Preprocess does the preprocessing of Encode alone (for timing) and
	// returns how many encoder runs the image takes; a family that
	// preprocesses inside Encode returns 1.
	Preprocess(img *vision.RGB) (runs int, err error)
	// Place lays an encoded image out for a prompt over a text model of
	// width width; piece looks a marker up in the vocabulary.
	Place(img *Image, width int, piece func(string) (int, bool)) (*Placed, error)
	// ImageToken is the checkpoint's image token id (-1 if unknown) and
	// the piece to look it up by.
	ImageToken() (int, string)
	// TextModel is the text model, its config and weights.
	TextModel() *arch.Model
}

// CompiledEncoder is an artifact's vision encoder of some family, run by
// the engine, with the preprocessing and the markers its manifest
// carries.
type CompiledEncoder interface {
	// PlacingEncoder's Place looks up the markers the artifact did not
	// record.
	PlacingEncoder
	// TextWidth is the width of the embedding rows.
	TextWidth() int
	// Preprocess is as FamilyModel.Preprocess.
	Preprocess(img *vision.RGB) (runs int, err error)
	// ImageTokenID is the id the prompt holds at each image row: the
	// artifact's, else looked up.
	ImageTokenID(look func(string) (int, bool)) (int, error)
	// SetFallback sets the encoder of the images none of the compiled
	// sizes holds (the source model in the interpreter).
	SetFallback(f Encoder)
	// Close releases the encoder.
	Close()
}

var families = map[string]*Family{}

// Register adds a family's runtime; it panics on a second entry of one
// name, a programming error.
func Register(f *Family) {
	if _, ok := families[f.Name]; ok {
		panic("vlm: family " + f.Name + " registered twice")
	}
	families[f.Name] = f
}

// Families lists the registered families, by name.
func Families() []*Family {
	var out []*Family
	for _, f := range families {
		out = append(out, f)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// familyNamed returns the runtime of vision family name.
func familyNamed(name string) (*Family, error) {
	f, ok := families[name]
	if !ok {
		return nil, fmt.Errorf("vlm: the %q vision family is not part of this build", name)
	}
	return f, nil
}

// HasVision reports whether e's artifact holds a vision encoder.
func HasVision(e *engine.Engine) bool { return len(e.VisionPlans()) > 0 }

// ArtifactFamily is the vision family of e's artifact's encoder, "" when
// it has none.
func ArtifactFamily(e *engine.Engine) string {
	if mv := e.Manifest().Vision; mv != nil && HasVision(e) {
		return mv.Family
	}
	return ""
}

// OpenArtifact prepares the vision encoder of e's artifact, of whichever
// family, to run with up to threads workers.
func OpenArtifact(e *engine.Engine, threads int) (CompiledEncoder, error) {
	mv := e.Manifest().Vision
	if mv == nil || !HasVision(e) {
		return nil, errors.New("vlm: the artifact has no vision encoder")
	}
	f, err := familyNamed(mv.Family)
	if err != nil {
		return nil, err
	}
	return f.OpenCompiled(e, threads)
}
