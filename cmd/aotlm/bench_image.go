package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/spf13/cobra"

	"github.com/aotlm/aotlm/internal/bench"
	"github.com/aotlm/aotlm/internal/visionload"
)

// benchImageCmd is bench with --image: it checks the flags, compiles the
// model into the cache as run does (with its tokenizer and mmproj file)
// and measures the image (visionload.Bench).
func benchImageCmd(cmd *cobra.Command, modelPath, mmproj string, llamaCpp bool, tokPath, file string, prompts, gens []int, pgs []string, cfg bench.Config,
	mode string, warm bool, seed uint64, asJSON bool, cpuProfile string) error {
	if modelPath == "" {
		return errors.New("bench: --image needs -m, a vision-language model")
	}
	pairs, err := bench.ParsePairs(pgs)
	if err != nil {
		return err
	}
	tests, err := bench.Tests(prompts, gens, pairs)
	if err != nil && (len(pairs) > 0 || slices.ContainsFunc(append(append([]int(nil), prompts...), gens...), func(n int) bool { return n != 0 })) {
		return err
	}
	cfg.Tests, cfg.Mode, cfg.Warmup, cfg.Seed = tests, mode, warm, seed
	if cpuProfile != "" {
		stop, err := bench.StartCPUProfile(cpuProfile)
		if err != nil {
			return err
		}
		defer stop()
	}
	if cfg.Repetitions < 1 {
		return fmt.Errorf("bench: -r %d: want at least 1 repetition", cfg.Repetitions)
	}
	path, err := resolveModelArg(modelPath, cmd.ErrOrStderr())
	if err != nil {
		return err
	}
	rep, err := visionload.BenchModel(path, mmproj, tokPath, file, llamaCpp, warm, cfg, cmd.ErrOrStderr())
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
