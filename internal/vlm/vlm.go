// Package vlm runs vision-language models in the graph interpreter:
// images to embedding rows (preprocessing, the vision encoder, the
// connector), the prompt layout that places them, and the text model
// reading them in place of token ids.
package vlm

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/aotlm/aotlm/internal/arch"
	"github.com/aotlm/aotlm/internal/format/detect"
	"github.com/aotlm/aotlm/internal/graph"
	"github.com/aotlm/aotlm/internal/vision"
)

// Model is a loaded vision-language model.
type Model struct {
	VLM  *arch.VLM
	Proc vision.Idefics3
	enc  *graph.Interpreter
	text *graph.Interpreter
	// fam is set for a family other than SmolVLM / Idefics3 (VLM and
	// Proc are then unset).
	fam family
}

// family is what a vision-language family other than SmolVLM (whose code
// is Model's own) defines: its preprocessing and encoder, its prompt
// layout, its image token and its text model.
type family interface {
	encode(enc *graph.Interpreter, img *vision.RGB) (*Image, error)
	place(img *Image, width int, piece func(string) (int, bool)) (*Placed, error)
	// imageToken is the checkpoint's image token id (-1 if unknown) and
	// the piece to look it up by.
	imageToken() (int, string)
	textModel() *arch.Model
	// encoder is the vision encoder's graph and weights.
	encoder() (*graph.Graph, graph.Weights, error)
}

// newFamily makes interpreters for a loaded model of family f.
func newFamily(f family, threads int) (*Model, error) {
	vg, vw, err := f.encoder()
	if err != nil {
		return nil, err
	}
	enc, err := graph.NewInterpreter(vg, vw, threads)
	if err != nil {
		return nil, fmt.Errorf("vision encoder: %w", err)
	}
	text := f.textModel()
	tg, err := arch.Build(&text.Config, arch.BuildOptions{AllLogits: true})
	if err != nil {
		return nil, err
	}
	tin, err := graph.NewInterpreter(tg, text.Weights, threads)
	if err != nil {
		return nil, fmt.Errorf("text model: %w", err)
	}
	return &Model{enc: enc, text: tin, fam: f}, nil
}

// IsVLM reports whether the Hugging Face folder dir holds a
// vision-language model this package runs.
func IsVLM(dir string) bool {
	b, err := os.ReadFile(filepath.Join(dir, "config.json"))
	if err != nil {
		return false
	}
	var m map[string]any
	if json.Unmarshal(b, &m) != nil {
		return false
	}
	return arch.IsVLM(m) || arch.IsQwen2VL(m)
}

// Open loads a SmolVLM / Idefics3, Qwen2-VL or Qwen2.5-VL model from a
// Hugging Face folder (config.json, preprocessor_config.json, safetensors).
func Open(dir string, threads int) (*Model, error) {
	ck, err := detect.Open(dir)
	if err != nil {
		return nil, err
	}
	defer ck.Close()
	var pre map[string]any
	if b, err := os.ReadFile(filepath.Join(dir, "preprocessor_config.json")); err == nil {
		if err := json.Unmarshal(b, &pre); err != nil {
			return nil, fmt.Errorf("preprocessor_config.json: %w", err)
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	if arch.IsQwen2VL(ck.Metadata()) {
		q, err := arch.LoadQwen2VL(ck, pre)
		if err != nil {
			return nil, err
		}
		return newFamily(&qwen2vl{m: q}, threads)
	}
	v, err := arch.LoadVLM(ck, pre)
	if err != nil {
		return nil, err
	}
	return New(v, threads)
}

// New makes interpreters for a loaded model.
func New(v *arch.VLM, threads int) (*Model, error) {
	vg, err := arch.BuildVision(&v.Vision)
	if err != nil {
		return nil, err
	}
	enc, err := graph.NewInterpreter(vg, v.VisionWeights, threads)
	if err != nil {
		return nil, fmt.Errorf("vision encoder: %w", err)
	}
	tg, err := arch.Build(&v.Text.Config, arch.BuildOptions{AllLogits: true})
	if err != nil {
		return nil, err
	}
	text, err := graph.NewInterpreter(tg, v.Text.Weights, threads)
	if err != nil {
		return nil, fmt.Errorf("text model: %w", err)
	}
	return &Model{VLM: v, enc: enc, text: text,
		Proc: vision.Idefics3{Tile: v.Vision.ImageSize, LongestEdge: v.Vision.LongestEdge}}, nil
}

// EncodeTile runs the encoder and connector on one ImageSize x ImageSize
// tile and returns TokensPerImage rows of the text width.
func (m *Model) EncodeTile(tile *vision.RGB) ([]float32, error) {
	vc := &m.VLM.Vision
	if tile.W != vc.ImageSize || tile.H != vc.ImageSize {
		return nil, fmt.Errorf("vision: tile of %dx%d, the encoder reads %dx%d", tile.W, tile.H, vc.ImageSize, vc.ImageSize)
	}
	rows, pos, err := vc.Patches(vision.Normalize(tile, vc.Mean, vc.Std))
	if err != nil {
		return nil, err
	}
	st := m.enc.NewState(len(pos))
	out, _, err := m.enc.RunInput(st, graph.Input{IDs: pos, Rows: rows})
	if err != nil {
		return nil, fmt.Errorf("vision encoder: %w", err)
	}
	return out, nil
}

// Image is an encoded image: the embedding rows of each slice (grid row
// by row) and of the overview (SmolVLM), or of its Rows x Cols merged
// patches in row-major order (Qwen2-VL: Embeds).
type Image struct {
	Rows, Cols int
	Slices     [][]float32
	Overview   []float32
	Embeds     []float32
}

// Encode preprocesses and encodes an image.
func (m *Model) Encode(img *vision.RGB) (*Image, error) {
	if m.fam != nil {
		return m.fam.encode(m.enc, img)
	}
	p, err := m.Proc.Preprocess(img)
	if err != nil {
		return nil, err
	}
	out := &Image{Rows: p.Rows, Cols: p.Cols}
	for _, s := range p.Slices {
		e, err := m.EncodeTile(s)
		if err != nil {
			return nil, err
		}
		out.Slices = append(out.Slices, e)
	}
	if out.Overview, err = m.EncodeTile(p.Overview); err != nil {
		return nil, err
	}
	return out, nil
}

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
func (m *Model) TextModel() *arch.Model {
	if m.fam != nil {
		return m.fam.textModel()
	}
	return m.VLM.Text
}

// Tiled reports whether the model's images are SmolVLM / Idefics3 tiles
// (Proc preprocesses them); another family preprocesses in Encode.
func (m *Model) Tiled() bool { return m.fam == nil }

// PosComponents is the number of rotary position components a text row
// carries: 3 for Qwen2-VL's M-RoPE, 1 otherwise.
func (m *Model) PosComponents() int { return m.text.Graph().PosComponents() }

// Place lays an encoded image out for a prompt as llama.cpp's mtmd does
// for the model's family; piece looks a marker up in the vocabulary.
func (m *Model) Place(img *Image, piece func(string) (int, bool)) (*Placed, error) {
	width := m.TextConfig().Hidden
	if m.fam != nil {
		return m.fam.place(img, width, piece)
	}
	ids, emb, err := Layout(img, width, piece)
	if err != nil {
		return nil, err
	}
	p := &Placed{IDs: ids}
	for i, id := range ids {
		if id == -1 {
			p.Rows = append(p.Rows, emb[i*width:(i+1)*width]...)
		}
	}
	p.Span = len(p.Rows) / width
	return p, nil
}

// ImageTokenID is the id the prompt holds at each image row: the
// checkpoint's, else the family's image piece looked up with piece.
func (m *Model) ImageTokenID(piece func(string) (int, bool)) (int, error) {
	id, name := -1, ImageTok
	if m.fam != nil {
		id, name = m.fam.imageToken()
	} else {
		id = m.VLM.Vision.ImageTokenID
	}
	if id >= 0 {
		return id, nil
	}
	id, ok := piece(name)
	if !ok {
		return 0, fmt.Errorf("the vocabulary has no %s token", name)
	}
	return id, nil
}

// OpenPair loads a SmolVLM / Idefics3, Qwen2-VL or Qwen2.5-VL model from
// llama.cpp's text GGUF and mmproj GGUF. The GGUF pair does not store the
// image token id: ImageTokenID looks it up.
func OpenPair(textPath, mmprojPath string, threads int) (*Model, error) {
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
	if isQwen2VLProjector(mm) {
		q, err := arch.LoadQwen2VLPair(text, mm)
		if err != nil {
			return nil, err
		}
		return newFamily(&qwen2vl{m: q}, threads)
	}
	v, err := arch.LoadVLMPair(text, mm)
	if err != nil {
		return nil, err
	}
	return New(v, threads)
}
