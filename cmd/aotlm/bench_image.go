package main

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/aotlm/aotlm/internal/bench"
	"github.com/aotlm/aotlm/internal/visionload"
)

// benchImage is bench with --image: it compiles the model into the cache
// as run does (with its tokenizer and mmproj file) and measures the image
// and cfg's tests (visionload.BenchModel).
func benchImage(cmd *cobra.Command, modelPath, mmproj, tokPath, file string, llamaCpp bool, cfg bench.Config, asJSON bool) error {
	if modelPath == "" {
		return errors.New("bench: --image needs -m, a vision-language model")
	}
	if cfg.Repetitions < 1 {
		return fmt.Errorf("bench: -r %d: want at least 1 repetition", cfg.Repetitions)
	}
	path, err := resolveModelArg(modelPath, cmd.ErrOrStderr())
	if err != nil {
		return err
	}
	rep, err := visionload.BenchModel(path, mmproj, tokPath, file, llamaCpp, cfg.Warmup, cfg, cmd.ErrOrStderr())
	if errors.Is(err, visionload.ErrNoEncoder) {
		return fmt.Errorf("bench: --image needs a vision-language model: an artifact with a vision plan, a vision-language folder (Hugging Face layout), or a text GGUF with --mmproj; %s is none of them", modelPath)
	}
	if err != nil {
		return err
	}
	if asJSON {
		return json.NewEncoder(cmd.OutOrStdout()).Encode(rep)
	}
	return rep.Write(cmd.OutOrStdout())
}
