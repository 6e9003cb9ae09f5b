// Package vlm runs vision-language models in the graph interpreter:
// images to embedding rows (preprocessing, the vision encoder, the
// connector), the prompt layout that places them, and the text model
// reading them in place of token ids.
package vlm

import (
	"encoding/json"
	"errors"
	"fmt"
	"github.com/aotlm/aotlm/internal/userfile"
	"os"
	"path/filepath"

	"github.com/aotlm/aotlm/internal/arch"
	"github.com/aotlm/aotlm/internal/format/detect"
	"github.com/aotlm/aotlm/internal/graph"
	"github.com/aotlm/aotlm/internal/vision"
)

// Model is a loaded vision-language model run by the graph interpreter.
type Model struct {
	// VLM is the checkpoint of a SmolVLM / Idefics3 model, nil for
	// another family.
	VLM  *arch.VLM
	enc  *graph.Interpreter
	text *graph.Interpreter
	fam  FamilyModel
}

// newModel makes interpreters for a loaded model of any family.
func newModel(f FamilyModel, threads int) (*Model, error) {
	vg, vw, err := f.Encoder()
	if err != nil {
		return nil, err
	}
	enc, err := graph.NewInterpreter(vg, vw, threads)
	if err != nil {
		return nil, fmt.Errorf("vision encoder: %w", err)
	}
	text := f.TextModel()
	tg, err := arch.Build(&text.Config, arch.BuildOptions{AllLogits: true})
	if err != nil {
		return nil, err
	}
	tin, err := graph.NewInterpreter(tg, text.Weights, threads)
	if err != nil {
		return nil, fmt.Errorf("text model: %w", err)
	}
	m := &Model{enc: enc, text: tin, fam: f}
	if f, ok := f.(interface{ fill(*Model) }); ok {
		f.fill(m)
	}
	return m, nil
}

// IsVLM reports whether the Hugging Face folder dir holds a
// vision-language model this package runs.
func IsVLM(dir string) bool {
	b, err := userfile.ReadFile(filepath.Join(dir, "config.json"), userfile.Config)
	if err != nil {
		return false
	}
	var m map[string]any
	if json.Unmarshal(b, &m) != nil {
		return false
	}
	f := arch.VisionFamilyOfHF(m)
	return f != nil && families[f.Name] != nil
}

// Options are choices of how a model runs its images.
type Options struct {
	// LlamaCpp follows llama.cpp's mtmd where a family's Hugging Face
	// processing and mtmd's differ and the family keeps both (InternVL:
	// the class token's position row and the tile grid); the other
	// families follow mtmd always.
	LlamaCpp bool
}

// apply sets o on a loaded family model that has the choices.
func (o Options) apply(fm FamilyModel) {
	if s, ok := fm.(interface{ setLlamaCpp(bool) }); ok {
		s.setLlamaCpp(o.LlamaCpp)
	}
}

// Open loads a vision-language model of any registered family from a
// Hugging Face folder (config.json, preprocessor_config.json, safetensors).
func Open(dir string, threads int) (*Model, error) { return OpenWith(dir, threads, Options{}) }

// OpenWith is Open with options.
func OpenWith(dir string, threads int, o Options) (*Model, error) {
	ck, err := detect.Open(dir)
	if err != nil {
		return nil, err
	}
	defer ck.Close()
	var pre map[string]any
	if b, err := userfile.ReadFile(filepath.Join(dir, "preprocessor_config.json"), userfile.Config); err == nil {
		if err := json.Unmarshal(b, &pre); err != nil {
			return nil, fmt.Errorf("preprocessor_config.json: %w", err)
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	if ck.Format() != "safetensors" {
		return nil, fmt.Errorf("vision-language models load from Hugging Face folders; %s is not supported yet", ck.Format())
	}
	af := arch.VisionFamilyOfHF(ck.Metadata())
	if af == nil {
		return nil, errors.New("config.json: not a vision-language model aotlm runs")
	}
	f, err := familyNamed(af.Name)
	if err != nil {
		return nil, err
	}
	fm, err := f.OpenHF(ck, pre)
	if err != nil {
		return nil, err
	}
	o.apply(fm)
	return newModel(fm, threads)
}

// Image is an encoded image: the embedding rows of each slice (grid row
// by row) and of the overview (SmolVLM; InternVL: its tiles and
// thumbnail, Overview nil without one, Rows and Cols 0 for mtmd's
// overview alone), or of its Rows x Cols merged patches in row-major
// order (Qwen2-VL: Embeds).
type Image struct {
	Rows, Cols int
	Slices     [][]float32
	Overview   []float32
	Embeds     []float32
}

// Encode preprocesses and encodes an image.
func (m *Model) Encode(img *vision.RGB) (*Image, error) { return m.fam.Encode(m.enc, img) }

// Preprocess does the preprocessing of Encode alone and returns how many
// encoder runs the image takes (FamilyModel.Preprocess).
func (m *Model) Preprocess(img *vision.RGB) (int, error) { return m.fam.Preprocess(img) }

// Logits runs the text model over ids from position 0, where id -1 rows
// read embeds (rows of the text width; nil when there is no image), and
// returns the logits of every row.
func (m *Model) Logits(ids []int, embeds []float32) ([]float32, error) {
	st := m.text.NewState(len(ids))
	out, _, err := m.text.RunInput(st, graph.Input{IDs: ids, Embeds: embeds})
	return out, err
}

// LogitsAt is Logits with each row's rotary position given
// (PosComponents values a row; nil: the row's index).
func (m *Model) LogitsAt(ids []int, embeds []float32, positions []int) ([]float32, error) {
	st := m.text.NewState(len(ids))
	out, _, err := m.text.RunInput(st, graph.Input{IDs: ids, Embeds: embeds, Positions: positions})
	return out, err
}

// TextConfig is the text model's config.
func (m *Model) TextConfig() *arch.Config {
	return &m.TextModel().Config
}

// TextModel is the text model: its config and weights.
func (m *Model) TextModel() *arch.Model { return m.fam.TextModel() }

// PosComponents is the number of rotary position components a text row
// carries: 3 for Qwen2-VL's M-RoPE, 1 otherwise.
func (m *Model) PosComponents() int { return m.text.Graph().PosComponents() }

// Place lays an encoded image out for a prompt as llama.cpp's mtmd does
// for the model's family; piece looks a marker up in the vocabulary.
func (m *Model) Place(img *Image, piece func(string) (int, bool)) (*Placed, error) {
	return m.fam.Place(img, m.TextConfig().Hidden, piece)
}

// ImageTokenID is the id the prompt holds at each image row: the
// checkpoint's, else the family's image piece looked up with piece.
func (m *Model) ImageTokenID(piece func(string) (int, bool)) (int, error) {
	id, name := m.fam.ImageToken()
	if id >= 0 {
		return id, nil
	}
	id, ok := piece(name)
	if !ok {
		return 0, fmt.Errorf("the vocabulary has no %s token", name)
	}
	return id, nil
}

// OpenPair loads a vision-language model of any registered family from
// llama.cpp's text GGUF and mmproj GGUF (the projector type names the
// family). The GGUF pair does not store the image token id: ImageTokenID
// looks it up.
func OpenPair(textPath, mmprojPath string, threads int) (*Model, error) {
	return OpenPairWith(textPath, mmprojPath, threads, Options{})
}

// OpenPairWith is OpenPair with options.
func OpenPairWith(textPath, mmprojPath string, threads int, o Options) (*Model, error) {
	text, err := detect.Open(textPath)
	if err != nil {
		return nil, err
	}
	defer text.Close()
	mm, err := detect.Open(mmprojPath)
	if err != nil {
		return nil, err
	}
	defer mm.Close()
	af, err := arch.VisionFamilyOfMMProj(mm)
	if err != nil {
		return nil, err
	}
	f, err := familyNamed(af.Name)
	if err != nil {
		return nil, err
	}
	fm, err := f.OpenPair(text, mm)
	if err != nil {
		return nil, err
	}
	o.apply(fm)
	return newModel(fm, threads)
}
