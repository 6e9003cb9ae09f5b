package main

import (
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"strings"

	"github.com/spf13/cobra"

	"github.com/aotlm/aotlm/internal/load"
	"github.com/aotlm/aotlm/internal/progress"
	"github.com/aotlm/aotlm/internal/recipe"
	"github.com/aotlm/aotlm/internal/score"
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
		loras                     []string
		passText, imatrixFile     string
		passCtx, passChunks       int
	)
	cmd := &cobra.Command{
		Use:   "quantize MODEL -o DIR [--recipe NAME|FILE.json]",
		Short: "Quantize a model's weights into a quantized model folder",
		Long:  strings.Replace(help("quantize"), "{presets}", strings.Join(recipe.Presets(), ", "), 1),
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
			if sensData != "" && len(loras) > 0 {
				return fmt.Errorf("--lora: --report-sensitivity measures the base model; quantize the merged model without it, or merge with compile --lora")
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
			if _, err := os.Stat(passText); passText != "" && err != nil {
				return fmt.Errorf("--passport: %w", err) // before the quantizing, not after
			}
			if jobs < 0 {
				return fmt.Errorf("--jobs %d: want 0 (one per CPU) or more", jobs)
			}
			src, err := resolveModelArg(args[0], cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			specs, err := load.LoRASpecs(loras)
			if err != nil {
				return err
			}
			bar := progress.NewTensors(cmd.ErrOrStderr(), "quantizing")
			rep, err := recipe.Quantize(src, out, recipe.QuantizeOptions{Recipe: rcp, LPBQReference: lpbqReference, Tokenizer: tokPath,
				FallbackW8: fallbackW8, Force: force, Jobs: jobs, Progress: bar.Update, LoRA: specs,
				Calib: recipe.CalibOptions{File: calibFile, Samples: calibSamples, Len: calibLen, Threads: threads}, Imatrix: imatrixFile})
			if err != nil {
				return withHints(err)
			}
			if passText != "" {
				p, err := score.StorePassport(out, passText, passCtx, passChunks, threads)
				if err != nil {
					return err
				}
				if !asJSON {
					if err := p.WriteText(cmd.ErrOrStderr()); err != nil {
						return err
					}
				}
			}
			if asJSON {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(rep)
			}
			return recipe.WriteReport(cmd.OutOrStdout(), rep)
		},
	}
	f := cmd.Flags()
	f.StringVarP(&out, "output", "o", "", "output folder (required)")
	f.StringVar(&recipeArg, "recipe", recipe.DefaultPreset, "preset name or recipe JSON file")
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
	f.StringArrayVar(&loras, "lora", nil, loraMergeHelp)
	f.StringVar(&autoOrder, "auto-order", "kl", "order in which --auto keeps linears at w8: kl (KL divergence alone) or kl-per-bit (KL divergence per bit w8 adds)")
	f.StringVar(&imatrixFile, "imatrix", "", "llama.cpp importance matrix (llama-imatrix's GGUF): weigh each linear's grid search by its inputs' mean squares, without a calibration pass")
	f.StringVar(&passText, "passport", "", "after quantizing, measure the perplexity and KL divergence of the float model, the simulation and the artifact on this text and store them in the folder (compile carries them into the artifact)")
	f.IntVar(&passCtx, "passport-ctx", 256, "tokens per chunk of --passport")
	f.IntVar(&passChunks, "passport-chunks", 32, "chunks of --passport (0: the whole text)")
	return cmd
}
