package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"github.com/aotlm/aotlm"
	"github.com/aotlm/aotlm/internal/artifact"
	"github.com/aotlm/aotlm/internal/bench"
	"github.com/aotlm/aotlm/internal/compile"
	"github.com/aotlm/aotlm/internal/vision"
	"github.com/aotlm/aotlm/internal/visionload"
)

// imageBench is what `bench --image` measures and prints.
type imageBench struct {
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
	DecodeMs       stat `json:"decode_ms"`     // the file to RGB pixels
	PreprocessMs   stat `json:"preprocess_ms"` // resize, letterbox, tiles
	EncodeMs       stat `json:"encode_ms"`     // preprocessing, the encoder and the connector, all tiles
	PrefillMs      stat `json:"prefill_ms"`    // the prompt of the image's layout, from an empty cache
	PrefillTokS    stat `json:"prefill_tok_s"` // its ids per second
	Repetitions    int  `json:"repetitions"`
	ImageEncodeTot stat `json:"image_to_cache_ms"` // decode + encode + prefill
	// Bench holds the usual tests (-p, -n, -pg) of the text model, when
	// asked for.
	Bench *bench.Report `json:"bench,omitempty"`
}

// stat is a mean and a sample standard deviation.
type stat struct {
	Mean   float64 `json:"mean"`
	Stddev float64 `json:"stddev"`
}

func statOf(v []float64) stat {
	var s stat
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

// benchImage measures an image through a vision-language model: decoding,
// preprocessing and encoding the image, and the prefill of its layout by
// the compiled text model; then the usual tests when tests is not empty.
func benchImage(cmd *cobra.Command, modelPath, mmproj, tokPath, file string, cfg bench.Config, warm, asJSON bool) error {
	if cfg.Repetitions < 1 {
		return fmt.Errorf("bench: -r %d: want at least 1 repetition", cfg.Repetitions)
	}
	path, err := resolveModelArg(modelPath, cmd.ErrOrStderr())
	if err != nil {
		return err
	}
	data, err := readImage(file)
	if err != nil {
		return err
	}
	// the options of benchArtifact, with the tokenizer
	art := path
	if !artifact.IsArtifact(path) {
		art, err = compile.Cached(path, compile.Options{ARLens: []int{32}, Ctx: 4096, ClampCtx: true, KV: "f32", Tokenizer: tokPath,
			MMProj: mmproj}, cmd.ErrOrStderr())
		if err != nil {
			return err
		}
	}
	m, err := aotlm.Open(art, aotlm.Options{Threads: cfg.Threads, Mode: cfg.Mode})
	if err != nil {
		return err
	}
	defer m.Close()
	if m.Tokenizer() == nil {
		return errors.New("bench: --image places the image's marker tokens, and the model has no tokenizer (pass --tokenizer)")
	}
	rep := imageBench{Image: filepath.Base(file), Threads: cfg.Threads, Repetitions: cfg.Repetitions}
	encoder, err := visionload.Open(visionload.Source{Model: m, Path: path, MMProj: mmproj, Threads: cfg.Threads})
	if errors.Is(err, visionload.ErrNoEncoder) {
		return fmt.Errorf("bench: --image needs a vision-language model: an artifact with a vision plan, a SmolVLM or Qwen2-VL folder, or a text GGUF with --mmproj; %s is none of them", modelPath)
	}
	if err != nil {
		return err
	}
	defer encoder.Close()
	switch {
	case encoder.Where == visionload.Interpreter:
		rep.Encoder = "graph interpreter (float32)"
	case encoder.Plans == 1:
		rep.Encoder = "the artifact's vision plan"
	default:
		rep.Encoder = "the artifact's vision plans"
	}
	var dec, pre, enc, fill, rate, total []float64
	img, err := vision.Decode(data, vision.DefaultLimits)
	if err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	first := time.Now()
	encoded, err := encoder.Encode(img) // the layout; a warm-up, or the first repetition
	if err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	firstEncode := time.Since(first)
	images := encoder.Prompter(m).NewImages()
	ph, err := images.AddEncoded(data, encoded)
	if err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	layout, err := images.Encode(ph)
	if err != nil {
		return err
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
		return err
	}
	defer s.Close()
	if len(ids) > s.Context() {
		return fmt.Errorf("bench: the image takes %d positions, the artifact's context %d", len(ids), s.Context())
	}
	prefill := func() (*aotlm.Result, error) {
		if err := s.Reset(); err != nil {
			return nil, err
		}
		return s.Generate(context.Background(), aotlm.Request{IDs: ids, Embeds: images.Embeds(), PromptOnly: true}, nil)
	}
	// the prefill is always warmed up (the first pass reads the mapped
	// weights from disk); --no-warmup spares the encoder's extra run
	if _, err := prefill(); err != nil {
		return err
	}
	for i := range cfg.Repetitions {
		t0 := time.Now()
		img, err := vision.Decode(data, vision.DefaultLimits)
		if err != nil {
			return err
		}
		t1 := time.Now()
		tiles, err := encoder.Preprocess(img)
		if err != nil {
			return err
		}
		t2 := time.Now()
		t3 := t2.Add(firstEncode)
		if warm || i > 0 {
			if _, err := encoder.Encode(img); err != nil {
				return err
			}
			t3 = time.Now()
		}
		res, err := prefill()
		if err != nil {
			return err
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
	if len(cfg.Tests) > 0 {
		s.Close()
		br, err := bench.RunArtifact(art, cfg)
		if err != nil {
			return err
		}
		rep.Bench = &br
	}
	out := cmd.OutOrStdout()
	if asJSON {
		return json.NewEncoder(out).Encode(rep)
	}
	return rep.write(out)
}

// write prints the image figures, then the usual table.
func (r *imageBench) write(w io.Writer) error {
	fmt.Fprintf(w, "image %s: %dx%d, %d encoder tiles, %d embedding rows in a prompt of %d ids; %d threads, %d repetitions; encoder: %s\n",
		r.Image, r.Width, r.Height, r.Tiles, r.Rows, r.Prompt, r.Threads, r.Repetitions, r.Encoder)
	fmt.Fprintf(w, "| %-28s | %20s |\n", "step", "ms (mean ± sd)")
	fmt.Fprintf(w, "| %-28s | %20s |\n", "----------------------------", "-------------------:")
	row := func(name string, s stat) { fmt.Fprintf(w, "| %-28s | %11.1f ± %6.1f |\n", name, s.Mean, s.Stddev) }
	row("decode file", r.DecodeMs)
	row("preprocess", r.PreprocessMs)
	row("preprocess + encode", r.EncodeMs)
	row(fmt.Sprintf("encode per tile (%d)", r.Tiles), stat{r.EncodeMs.Mean / float64(r.Tiles), r.EncodeMs.Stddev / float64(r.Tiles)})
	row(fmt.Sprintf("prefill %d ids", r.Prompt), r.PrefillMs)
	row("image to cache", r.ImageEncodeTot)
	fmt.Fprintf(w, "prefill of the image's ids: %.1f ± %.1f tok/s\n", r.PrefillTokS.Mean, r.PrefillTokS.Stddev)
	if r.Bench != nil {
		fmt.Fprintln(w)
		return r.Bench.WriteTable(w)
	}
	return nil
}

// benchImageCmd is bench with --image: it checks the flags and runs
// benchImage.
func benchImageCmd(cmd *cobra.Command, modelPath, mmproj, tokPath, file string, prompts, gens []int, pgs []string, cfg bench.Config,
	mode string, warm bool, seed uint64, asJSON bool, cpuProfile string) error {
	if modelPath == "" {
		return errors.New("bench: --image needs -m, a vision-language model")
	}
	pairs, err := parsePairs(pgs)
	if err != nil {
		return err
	}
	tests, err := bench.Tests(prompts, gens, pairs)
	if err != nil && (len(pairs) > 0 || slices.ContainsFunc(append(append([]int(nil), prompts...), gens...), func(n int) bool { return n != 0 })) {
		return err
	}
	cfg.Tests, cfg.Mode, cfg.Warmup, cfg.Seed = tests, mode, warm, seed
	if cpuProfile != "" {
		stop, err := startCPUProfile(cpuProfile)
		if err != nil {
			return err
		}
		defer stop()
	}
	return benchImage(cmd, modelPath, mmproj, tokPath, file, cfg, warm, asJSON)
}
