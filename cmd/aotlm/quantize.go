package main

import (
	"encoding/json"
	"fmt"
	"runtime"
	"strings"

	"github.com/spf13/cobra"

	"github.com/aotlm/aotlm/internal/progress"
	"github.com/aotlm/aotlm/internal/recipe"
)

func newQuantizeCmd() *cobra.Command {
	var (
		out, recipeArg, tokPath   string
		fallbackW8, force, asJSON bool
		lpbqReference             bool
		jobs                      int
		calibFile                 string
		calibSamples, calibLen    int
		threads                   int
		sensData                  string
		sensCtx, sensChunks       int
		auto                      bool
		maxSize                   string
		autoOrder                 string
	)
	cmd := &cobra.Command{
		Use:   "quantize MODEL -o DIR [--recipe NAME|FILE.json]",
		Short: "Quantize a model's weights into a quantized model folder",
		Long: `Quantize a model's weights with a recipe and write a quantized model folder
(model.safetensors with integer weights and their scales, aotlm-quant.json,
and the tokenizer), which compile, run and ppl read. MODEL is a file or
folder, or a Hub repository org/name[@rev] (pulled first, see aotlm pull).

Recipes are JSON files, or one of the presets: ` + strings.Join(recipe.Presets(), ", ") + `.
A weight whose input width the recipe's block size does not divide gets a
padded last block, or W8 with --fallback-w8; a q6k weight whose width is
not a multiple of 256 always becomes W8 (q6k has no padded form, as
llama.cpp's Q6_K falls back to Q8_0). The report says which.
The per-tensor report (scheme, relative RMS error, bits per weight) goes to
stdout; progress (tensors, bytes written, rate) to stderr.

The model is streamed: tensors are read from the mapped checkpoint,
quantized and written one at a time, --jobs of them at once, so memory
holds about --jobs tensors in float32 (the largest one, the embedding or
classifier, bounds it), not the whole model; a recipe's rotation or
calibration (below) holds the whole model in float32 instead.

A recipe's "rotation" folds Hadamard rotations into the float weights
first (R1 on the residual stream, R2 per head between v_proj and o_proj).
Its "calibration" methods (awq, smooth_alpha, gptq) need --calib: the text
is tokenized once and --calib-samples windows of --calib-len tokens, spread
evenly over it, run through the float model to collect each linear's input
statistics. The manifest records what was done ("calibration"), including
each linear's calibrated input range. docs/quantization.md has examples.

--report-sensitivity TEXT quantizes nothing: it quantizes each linear
alone with the recipe's scheme and prints its KL divergence from the float
model over the first --sensitivity-chunks chunks of TEXT (llama.cpp's
perplexity rule), most sensitive first: the tensors to keep at W8. With
--auto and --max-size it keeps the most sensitive linears at W8 while the
estimated size stays within the budget, prints the recipe it chose, and
quantizes with it (the manifest records it); --auto-order kl-per-bit ranks
them by KL divergence per bit that W8 adds instead, which favours small
sensitive linears over large ones.`,
		Example: `  aotlm quantize stories260K.gguf -o stories-w4/ --recipe w4a16-lpbq
  aotlm quantize Qwen3-0.6B/ -o q/ --recipe my-recipe.json --json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			rcp, err := recipe.Load(recipeArg)
			if err != nil {
				return err
			}
			if autoOrder != "kl" && autoOrder != "kl-per-bit" {
				return fmt.Errorf("--auto-order %q: want kl or kl-per-bit", autoOrder)
			}
			if auto && (sensData == "" || maxSize == "" || out == "") {
				return fmt.Errorf("--auto needs --report-sensitivity TEXT (the text to measure on), --max-size and -o DIR")
			}
			if sensData != "" {
				o := recipe.SensitivityRun{File: sensData, Tokenizer: tokPath, Ctx: sensCtx, Chunks: sensChunks, Threads: threads, PerBit: autoOrder == "kl-per-bit"}
				if auto {
					o.MaxSize = maxSize
				}
				rep, err := recipe.RunSensitivity(args[0], rcp, o)
				switch {
				case err != nil:
					return err
				case !auto && asJSON:
					return json.NewEncoder(cmd.OutOrStdout()).Encode(rep)
				case !auto:
					return recipe.WriteSensitivity(cmd.OutOrStdout(), rep.Rows, rep.FloatPPL)
				}
				rcp = *rep.Recipe
				if err := rep.WriteAuto(cmd.ErrOrStderr()); err != nil {
					return err
				}
			}
			if out == "" {
				return fmt.Errorf("no output folder: pass -o DIR")
			}
			if jobs < 0 {
				return fmt.Errorf("--jobs %d: want 0 (one per CPU) or more", jobs)
			}
			src, err := resolveModelArg(args[0], cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			bar := progress.NewTensors(cmd.ErrOrStderr(), "quantizing")
			rep, err := recipe.Quantize(src, out, recipe.QuantizeOptions{Recipe: rcp, LPBQReference: lpbqReference, Tokenizer: tokPath,
				FallbackW8: fallbackW8, Force: force, Jobs: jobs, Progress: bar.Update,
				Calib: recipe.CalibOptions{File: calibFile, Samples: calibSamples, Len: calibLen, Threads: threads}})
			if err != nil {
				return withHints(err)
			}
			if asJSON {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(rep)
			}
			return recipe.WriteReport(cmd.OutOrStdout(), rep)
		},
	}
	f := cmd.Flags()
	f.StringVarP(&out, "output", "o", "", "output folder (required)")
	f.StringVar(&recipeArg, "recipe", "w4a16-lpbq", "preset name or recipe JSON file")
	f.StringVar(&tokPath, "tokenizer", "", "tokenizer to copy, for checkpoints without one")
	f.BoolVar(&fallbackW8, "fallback-w8", false, "quantize weights the block size does not divide at W8 instead of padding")
	f.BoolVar(&force, "force", false, "replace an existing output folder that holds only the files its aotlm-quant.json names")
	f.BoolVar(&lpbqReference, "lpbq-reference", false, "LPBQ ints rounded against the unrounded block scale, bit-exact with the published rule (default: refined against k*S)")
	f.BoolVar(&asJSON, "json", false, "print the report as one JSON object")
	f.IntVarP(&jobs, "jobs", "j", 0, jobsHelp)
	f.StringVar(&calibFile, "calib", "", "calibration text for the recipe's calibrated methods (awq, smooth_alpha, gptq)")
	f.IntVar(&calibSamples, "calib-samples", 64, "calibration windows taken from --calib")
	f.IntVar(&calibLen, "calib-len", 256, "tokens per calibration window (BOS first)")
	f.IntVarP(&threads, "threads", "t", runtime.GOMAXPROCS(0), "threads of the calibration passes")
	f.StringVar(&sensData, "report-sensitivity", "", "instead of quantizing, report each linear's KL divergence from the float model when quantized alone, over this text")
	f.IntVar(&sensCtx, "sensitivity-ctx", 256, "tokens per chunk of --report-sensitivity")
	f.IntVar(&sensChunks, "sensitivity-chunks", 8, "chunks of --report-sensitivity")
	f.BoolVar(&auto, "auto", false, "with --report-sensitivity and --max-size: keep the most sensitive linears at w8 within the size budget, then quantize")
	f.StringVar(&maxSize, "max-size", "", "size budget of --auto: bits per weight (5.5b) or bytes (1.5MB) of all parameters")
	f.StringVar(&autoOrder, "auto-order", "kl", "order in which --auto keeps linears at w8: kl (KL divergence alone) or kl-per-bit (KL divergence per bit w8 adds)")
	return cmd
}
