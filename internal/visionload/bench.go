package visionload

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"time"

	"github.com/aotlm/aotlm"
	"github.com/aotlm/aotlm/internal/bench"
	"github.com/aotlm/aotlm/internal/load"
	"github.com/aotlm/aotlm/internal/vision"
)

// BenchConfig says what Bench measures.
type BenchConfig struct {
	// Artifact is the compiled text model; its vision plans encode the
	// image when it has them.
	Artifact string
	// Path and MMProj name the source model's encoder otherwise, and
	// LlamaCpp its choices (Source).
	Path, MMProj string
	LlamaCpp     bool
	// Image is the file's name and Data its bytes (ReadImage).
	Image string
	Data  []byte
	// Warm runs the encoder once before the repetitions; without it the
	// run that lays the image out is the first repetition.
	Warm bool
	// Bench holds the threads, the repetitions, the prefill mode and the
	// text model's usual tests, run after the image when there are any.
	Bench bench.Config
}

// BenchReport is what Bench measures.
type BenchReport struct {
	Image   string `json:"image"`
	Width   int    `json:"width"`
	Height  int    `json:"height"`
	Tiles   int    `json:"tiles"`    // encoder runs: the grid's slices and the overview
	Rows    int    `json:"rows"`     // embedding rows placed in the prompt
	Prompt  int    `json:"n_prompt"` // prompt ids of the image's layout (BOS, markers, rows)
	Threads int    `json:"threads"`
	// Encoder says which implementation encodes the image.
	Encoder string `json:"encoder"`
	// times of one image, mean and sample standard deviation over the
	// repetitions, in milliseconds
	DecodeMs       Stat `json:"decode_ms"`     // the file to RGB pixels
	PreprocessMs   Stat `json:"preprocess_ms"` // resize, letterbox, tiles
	EncodeMs       Stat `json:"encode_ms"`     // preprocessing, the encoder and the connector, all tiles
	PrefillMs      Stat `json:"prefill_ms"`    // the prompt of the image's layout, from an empty cache
	PrefillTokS    Stat `json:"prefill_tok_s"` // its ids per second
	Repetitions    int  `json:"repetitions"`
	ImageEncodeTot Stat `json:"image_to_cache_ms"` // decode + encode + prefill
	// Bench holds the usual tests (-p, -n, -pg) of the text model, when
	// asked for.
	Bench *bench.Report `json:"bench,omitempty"`
}

// Stat is a mean and a sample standard deviation.
type Stat struct {
	Mean   float64 `json:"mean"`
	Stddev float64 `json:"stddev"`
}

func statOf(v []float64) Stat {
	var s Stat
	for _, x := range v {
		s.Mean += x
	}
	s.Mean /= float64(len(v))
	if len(v) > 1 {
		for _, x := range v {
			s.Stddev += (x - s.Mean) * (x - s.Mean)
		}
		s.Stddev = math.Sqrt(s.Stddev / float64(len(v)-1))
	}
	return s
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// Bench measures an image through a vision-language model: decoding,
// preprocessing and encoding the image, and the prefill of its layout by
// the compiled text model; then the usual tests when cfg.Bench has any.
// It returns an error wrapping ErrNoEncoder when the model has no vision
// encoder.
func Bench(cfg BenchConfig) (*BenchReport, error) {
	bc := cfg.Bench
	m, err := aotlm.Open(cfg.Artifact, aotlm.Options{Threads: bc.Threads, Mode: bc.Mode})
	if err != nil {
		return nil, err
	}
	defer m.Close()
	if m.Tokenizer() == nil {
		return nil, errors.New("bench: --image places the image's marker tokens, and the model has no tokenizer (pass --tokenizer)")
	}
	rep := &BenchReport{Image: filepath.Base(cfg.Image), Threads: bc.Threads, Repetitions: bc.Repetitions}
	encoder, err := Open(Source{Model: m, Path: cfg.Path, MMProj: cfg.MMProj, Threads: bc.Threads, LlamaCpp: cfg.LlamaCpp})
	if err != nil {
		return nil, err
	}
	defer encoder.Close()
	switch {
	case encoder.Where == Interpreter:
		rep.Encoder = "graph interpreter (float32)"
	case encoder.Plans == 1:
		rep.Encoder = "the artifact's vision plan"
	default:
		rep.Encoder = "the artifact's vision plans"
	}
	var dec, pre, enc, fill, rate, total []float64
	img, err := vision.Decode(cfg.Data, vision.DefaultLimits)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", cfg.Image, err)
	}
	first := time.Now()
	encoded, err := encoder.Encode(img) // the layout; a warm-up, or the first repetition
	if err != nil {
		return nil, fmt.Errorf("%s: %w", cfg.Image, err)
	}
	firstEncode := time.Since(first)
	images := encoder.Prompter(m).NewImages()
	ph, err := images.AddEncoded(cfg.Data, encoded)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", cfg.Image, err)
	}
	layout, err := images.Encode(ph)
	if err != nil {
		return nil, err
	}
	ids := layout
	if bos := m.BOS(); bos >= 0 {
		ids = append([]int{bos}, layout...)
	}
	for _, id := range ids {
		if aotlm.IsEmbedID(id) {
			rep.Rows++
		}
	}
	rep.Prompt = len(ids)
	s, err := m.NewSession(0)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	if len(ids) > s.Context() {
		return nil, fmt.Errorf("bench: the image takes %d positions, the artifact's context %d", len(ids), s.Context())
	}
	prefill := func() (*aotlm.Result, error) {
		if err := s.Reset(); err != nil {
			return nil, err
		}
		return s.Generate(context.Background(), aotlm.Request{IDs: ids, Embeds: images.Embeds(), PromptOnly: true}, nil)
	}
	// the prefill is always warmed up (the first pass reads the mapped
	// weights from disk); Warm false spares the encoder's extra run
	if _, err := prefill(); err != nil {
		return nil, err
	}
	for i := range bc.Repetitions {
		t0 := time.Now()
		img, err := vision.Decode(cfg.Data, vision.DefaultLimits)
		if err != nil {
			return nil, err
		}
		t1 := time.Now()
		tiles, err := encoder.Preprocess(img)
		if err != nil {
			return nil, err
		}
		t2 := time.Now()
		t3 := t2.Add(firstEncode)
		if cfg.Warm || i > 0 {
			if _, err := encoder.Encode(img); err != nil {
				return nil, err
			}
			t3 = time.Now()
		}
		res, err := prefill()
		if err != nil {
			return nil, err
		}
		rep.Width, rep.Height, rep.Tiles = img.W, img.H, tiles
		dec = append(dec, ms(t1.Sub(t0)))
		pre = append(pre, ms(t2.Sub(t1)))
		enc = append(enc, ms(t3.Sub(t2)))
		fill = append(fill, ms(res.Prefill))
		rate = append(rate, res.PrefillTokS())
		total = append(total, ms(t1.Sub(t0)+t3.Sub(t2)+res.Prefill))
	}
	rep.DecodeMs, rep.PreprocessMs, rep.EncodeMs = statOf(dec), statOf(pre), statOf(enc)
	rep.PrefillMs, rep.PrefillTokS, rep.ImageEncodeTot = statOf(fill), statOf(rate), statOf(total)
	if len(bc.Tests) > 0 {
		s.Close()
		br, err := bench.RunArtifact(cfg.Artifact, bc)
		if err != nil {
			return nil, err
		}
		rep.Bench = &br
	}
	return rep, nil
}

// Write prints the image figures, then the usual table.
func (r *BenchReport) Write(w io.Writer) error {
	fmt.Fprintf(w, "image %s: %dx%d, %d encoder tiles, %d embedding rows in a prompt of %d ids; %d threads, %d repetitions; encoder: %s\n",
		r.Image, r.Width, r.Height, r.Tiles, r.Rows, r.Prompt, r.Threads, r.Repetitions, r.Encoder)
	fmt.Fprintf(w, "| %-28s | %20s |\n", "step", "ms (mean ± sd)")
	fmt.Fprintf(w, "| %-28s | %20s |\n", "----------------------------", "-------------------:")
	row := func(name string, s Stat) { fmt.Fprintf(w, "| %-28s | %11.1f ± %6.1f |\n", name, s.Mean, s.Stddev) }
	row("decode file", r.DecodeMs)
	row("preprocess", r.PreprocessMs)
	row("preprocess + encode", r.EncodeMs)
	row(fmt.Sprintf("encode per tile (%d)", r.Tiles), Stat{r.EncodeMs.Mean / float64(r.Tiles), r.EncodeMs.Stddev / float64(r.Tiles)})
	row(fmt.Sprintf("prefill %d ids", r.Prompt), r.PrefillMs)
	row("image to cache", r.ImageEncodeTot)
	fmt.Fprintf(w, "prefill of the image's ids: %.1f ± %.1f tok/s\n", r.PrefillTokS.Mean, r.PrefillTokS.Stddev)
	if r.Bench != nil {
		fmt.Fprintln(w)
		return r.Bench.WriteTable(w)
	}
	return nil
}

// BenchModel is Bench for the model a user names: path (a folder, a GGUF
// with mmproj, or an artifact) is compiled into the cache with the
// defaults of run (tokenizer replacing a folder's own when given; llamaCpp
// as visionload.Source.LlamaCpp), and
// the image file is read within the decoding limits; notes go to log.
func BenchModel(path, mmproj, tokenizer, image string, llamaCpp, warm bool, bc bench.Config, log io.Writer) (*BenchReport, error) {
	data, err := ReadImage(image)
	if err != nil {
		return nil, err
	}
	opts := load.CompileDefaults()
	opts.Tokenizer, opts.MMProj, opts.VisionLlamaCpp = tokenizer, mmproj, llamaCpp
	art, err := load.Cached(path, opts, log)
	if err != nil {
		return nil, err
	}
	return Bench(BenchConfig{Artifact: art, Path: path, MMProj: mmproj, LlamaCpp: llamaCpp, Image: image, Data: data, Warm: warm, Bench: bc})
}
