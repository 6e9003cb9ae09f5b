package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/aotlm/aotlm"
	"github.com/aotlm/aotlm/internal/visionload"
)

// imageFlags are run's image flags.
type imageFlags struct {
	files         []string
	mmproj        string
	visionWeights string
	visionBuckets string
	llamaCpp      bool
}

// addImageFlags adds run's --image and --mmproj flags.
func addImageFlags(f *pflag.FlagSet) *imageFlags {
	var fl imageFlags
	f.StringArrayVar(&fl.files, "image", nil, "an image (JPEG, PNG, GIF, WebP) for a vision-language model (repeatable); "+
		"each goes where the prompt writes <image>, else before the prompt")
	f.StringVar(&fl.mmproj, "mmproj", "", "llama.cpp's vision GGUF (mmproj) for a text GGUF given with -m, with --image")
	f.StringVar(&fl.visionWeights, "vision-weights", "", visionWeightsHelp)
	f.StringVar(&fl.visionBuckets, "vision-buckets", "", visionBucketsHelp)
	f.BoolVar(&fl.llamaCpp, "vision-llama-cpp", false, visionLlamaCppHelp)
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
	enc, err := visionload.Open(visionload.Source{Model: m, Path: r.modelPath, MMProj: r.images.mmproj, Threads: r.threads, Fallback: true, LlamaCpp: r.images.llamaCpp})
	if errors.Is(err, visionload.ErrNoEncoder) {
		return fmt.Errorf("--image needs a vision-language model: an artifact compiled with its vision encoder, a SmolVLM, Qwen2-VL, Qwen2.5-VL or InternVL folder (Hugging Face layout), or a text GGUF with --mmproj; %s is none of them", r.modelPath)
	}
	if err != nil {
		return err
	}
	defer enc.Close()
	images, err := visionload.EncodeFiles(m, enc, r.images.files)
	if err != nil {
		return err
	}
	req := r.req
	if req.Prompt, err = images.Mark(r.prompt); err != nil {
		return err
	}
	if r.useChat {
		if err := chatPrompt(&req, r.system, m); err != nil {
			return err
		}
	}
	if req.IDs, err = images.IDs(req.Prompt, req.Raw); err != nil {
		return err
	}
	im, err := images.Model()
	if err != nil {
		return err
	}
	s, err := im.NewSession(min(r.ctx, m.Info().Context))
	if errors.Is(err, visionload.ErrPositionsNeedEngine) {
		return fmt.Errorf("%w; drop --no-compile", err)
	}
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
		Seed: req.Sampling.Seed}, Images: images.Len(), ImageEncodeMs: float64(images.EncodeTime.Microseconds()) / 1000}
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
