package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/aotlm/aotlm"
	"github.com/aotlm/aotlm/internal/vision"
	"github.com/aotlm/aotlm/internal/vlm"
)

// imageFlags are run's image flags.
type imageFlags struct {
	files         []string
	mmproj        string
	visionWeights string
	visionBuckets string
}

// addImageFlags adds run's --image and --mmproj flags.
func addImageFlags(f *pflag.FlagSet) *imageFlags {
	var fl imageFlags
	f.StringArrayVar(&fl.files, "image", nil, "an image (JPEG, PNG, GIF, WebP) for a vision-language model (repeatable); "+
		"each goes where the prompt writes <image>, else before the prompt")
	f.StringVar(&fl.mmproj, "mmproj", "", "llama.cpp's vision GGUF (mmproj) for a text GGUF given with -m, with --image")
	f.StringVar(&fl.visionWeights, "vision-weights", "", visionWeightsHelp)
	f.StringVar(&fl.visionBuckets, "vision-buckets", "", visionBucketsHelp)
	return &fl
}

// imageRun is what run passes on when images are given.
type imageRun struct {
	modelPath, prompt, system string
	images                    imageFlags
	threads, ctx              int
	req                       aotlm.Request
	useChat, asJSON           bool
}

// runWithImages encodes the images with the artifact's vision plan (or,
// when the model is not compiled, the encoder of its folder or mmproj
// file through the graph interpreter), places their embedding rows in the
// prompt and generates with the text model.
func runWithImages(cmd *cobra.Command, m *aotlm.Model, r imageRun) error {
	piece := func(s string) (int, bool) {
		ids, err := m.Encode(s, true)
		if err != nil || len(ids) != 1 {
			return 0, false
		}
		return ids[0], true
	}
	enc, imageID, err := openImageEncoder(m, r, piece)
	if err != nil {
		return err
	}
	defer enc.Close()
	start := time.Now()
	var encoded []*vlm.Image
	for _, path := range r.images.files {
		img, err := vision.DecodeFile(path, vision.DefaultLimits)
		if err != nil {
			return err
		}
		e, err := enc.Encode(img)
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		encoded = append(encoded, e)
	}
	encodeTime := time.Since(start)

	prompt := r.prompt
	switch c := strings.Count(prompt, vlm.ImageTok); {
	case c == 0:
		prompt = strings.Repeat(vlm.ImageTok, len(encoded)) + prompt
	case c != len(encoded):
		return fmt.Errorf("the prompt has %d %s markers for %d images", c, vlm.ImageTok, len(encoded))
	}
	req := r.req
	req.Prompt = prompt
	if r.useChat {
		if err := chatPrompt(&req, r.system, m); err != nil {
			return err
		}
	}
	var ids []int
	var placed []*vlm.Placed
	for i, part := range strings.Split(req.Prompt, vlm.ImageTok) {
		if i > 0 {
			p, err := enc.Place(encoded[i-1], piece)
			if err != nil {
				return err
			}
			placed = append(placed, p)
			for _, id := range p.IDs {
				if id == -1 {
					id = imageID
				}
				ids = append(ids, id)
			}
		}
		if part == "" && i > 0 {
			continue
		}
		pids, err := m.Encode(part, req.Raw || i > 0)
		if err != nil {
			return err
		}
		ids = append(ids, pids...)
	}
	req.IDs = ids

	im, err := aotlm.NewModel(aotlm.Config{Info: m.Info(), Tokenizer: m.Tokenizer(), BOS: m.BOS(), EOS: m.StopIDs(),
		NewSequence: func(n int) (aotlm.Sequence, error) {
			if n <= 0 {
				n = m.Info().Context
			}
			return newImageSequence(m, enc, imageID, placed, n)
		}})
	if err != nil {
		return err
	}
	s, err := im.NewSession(min(r.ctx, m.Info().Context))
	if err != nil {
		return err
	}
	defer s.Close()
	if len(req.IDs) > s.Context() {
		return fmt.Errorf("%w: %d prompt tokens with the images, context %d", aotlm.ErrPromptTooLong, len(req.IDs), s.Context())
	}
	out := cmd.OutOrStdout()
	var onToken func(aotlm.Token) error
	if !r.asJSON {
		if !r.useChat {
			if _, err := io.WriteString(out, r.prompt); err != nil {
				return fmt.Errorf("writing output: %w", err)
			}
		}
		onToken = func(t aotlm.Token) error {
			if _, err := io.WriteString(out, t.Text); err != nil {
				return fmt.Errorf("writing output: %w", err)
			}
			return nil
		}
	}
	res, err := s.Generate(cmd.Context(), req, onToken)
	if err != nil {
		return err
	}
	rep := imageReport{runReport: runReport{PromptIDs: res.PromptIDs, IDs: res.IDs, Text: res.Text, StopReason: res.StopReason,
		TTFTMs: float64(res.TTFT.Microseconds()) / 1000, PrefillTokS: res.PrefillTokS(), DecodeTokS: res.DecodeTokS(),
		Seed: req.Sampling.Seed}, Images: len(encoded), ImageEncodeMs: float64(encodeTime.Microseconds()) / 1000}
	if r.asJSON {
		return json.NewEncoder(out).Encode(rep)
	}
	fmt.Fprintln(out)
	fmt.Fprintf(cmd.ErrOrStderr(), "%d images encoded in %.1f ms; prompt %d tokens, %.1f tok/s; generated %d tokens, %.1f tok/s (%s)\n",
		rep.Images, rep.ImageEncodeMs, len(rep.PromptIDs), rep.PrefillTokS, len(rep.IDs), rep.DecodeTokS, rep.StopReason)
	return nil
}

// imageReport is what `run --image --json` prints.
type imageReport struct {
	runReport
	Images        int     `json:"images"`
	ImageEncodeMs float64 `json:"image_encode_ms"`
}
