package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"text/tabwriter"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/aotlm/aotlm/internal/qmodel"
	"github.com/aotlm/aotlm/internal/quant"
)

func newQuantizeCmd() *cobra.Command {
	var (
		out, recipeArg, tokPath   string
		fallbackW8, force, asJSON bool
		lpbqReference             bool
		calibFile                 string
		calibSamples, calibLen    int
		threads                   int
	)
	cmd := &cobra.Command{
		Use:   "quantize MODEL -o DIR [--recipe NAME|FILE.json]",
		Short: "Quantize a model's weights into a quantized model folder",
		Long: `Quantize a model's weights with a recipe and write a quantized model folder
(model.safetensors with integer weights and their scales, aotlm-quant.json,
and the tokenizer), which compile, run and ppl read.

Recipes are JSON files, or one of the presets: ` + strings.Join(quant.PresetNames(), ", ") + `.
A weight whose input width the recipe's block size does not divide gets a
padded last block, or W8 with --fallback-w8; the report says which.
The per-tensor report (scheme, relative RMS error, bits per weight) goes to
stdout; progress to stderr.

A recipe's "rotation" folds Hadamard rotations into the float weights
first (R1 on the residual stream, R2 per head between v_proj and o_proj).
Its "calibration" methods (awq, smooth_alpha, gptq) need --calib: the text
is tokenized once and --calib-samples windows of --calib-len tokens, spread
evenly over it, run through the float model to collect each linear's input
statistics. The manifest records what was done ("calibration"), including
each linear's calibrated input range. docs/quantization.md has examples.`,
		Example: `  aotlm quantize stories260K.gguf -o stories-w4/ --recipe w4a16-lpbq
  aotlm quantize Qwen3-0.6B/ -o q/ --recipe my-recipe.json --json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if out == "" {
				return fmt.Errorf("no output folder: pass -o DIR")
			}
			recipe, err := loadRecipe(recipeArg)
			if err != nil {
				return err
			}
			if lpbqReference {
				recipe = withLPBQMode(recipe, quant.LPBQReference)
			}
			tokSrc := tokPath
			if tokSrc == "" {
				tokSrc = args[0]
			}
			prepare, err := prepareFunc(recipe, calibOptions{file: calibFile, samples: calibSamples, len_: calibLen,
				tokenizer: tokSrc, threads: threads})
			if err != nil {
				return err
			}
			var bar *progressbar.ProgressBar
			opts := qmodel.Options{Recipe: recipe, Tokenizer: tokPath, FallbackW8: fallbackW8, Force: force, Prepare: prepare,
				Progress: func(done, total int, name string) {
					if !isTerminal(cmd.ErrOrStderr()) {
						return
					}
					if bar == nil {
						bar = progressbar.NewOptions(total, progressbar.OptionSetWriter(cmd.ErrOrStderr()),
							progressbar.OptionSetDescription("quantizing"), progressbar.OptionClearOnFinish())
					}
					bar.Set(done)
				}}
			rep, err := qmodel.Quantize(args[0], out, opts)
			if err != nil {
				return err
			}
			if asJSON {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(rep)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 2, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "tensor\tshape\tscheme\trel rmse\tbits/w\tnote")
			for _, t := range rep.Tensors {
				note := t.Fallback
				if t.Padded {
					note = "last block padded"
				}
				fmt.Fprintf(tw, "%s\t%v\t%s\t%.4f\t%.2f\t%s\n", t.Name, t.Shape, t.Scheme, t.RelErr, t.Bits, note)
			}
			tw.Flush()
			fmt.Fprintf(cmd.OutOrStdout(), "%d parameters, %.2f bits per weight, written to %s\n", rep.Params, rep.WeightBits, rep.Output)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVarP(&out, "output", "o", "", "output folder (required)")
	f.StringVar(&recipeArg, "recipe", "w4a16-lpbq", "preset name or recipe JSON file")
	f.StringVar(&tokPath, "tokenizer", "", "tokenizer to copy, for checkpoints without one")
	f.BoolVar(&fallbackW8, "fallback-w8", false, "quantize weights the block size does not divide at W8 instead of padding")
	f.BoolVar(&force, "force", false, "replace an existing output folder")
	f.BoolVar(&lpbqReference, "lpbq-reference", false, "LPBQ ints rounded against the unrounded block scale, bit-exact with the published rule (default: refined against k*S)")
	f.BoolVar(&asJSON, "json", false, "print the report as one JSON object")
	f.StringVar(&calibFile, "calib", "", "calibration text for the recipe's calibrated methods (awq, smooth_alpha, gptq)")
	f.IntVar(&calibSamples, "calib-samples", 64, "calibration windows taken from --calib")
	f.IntVar(&calibLen, "calib-len", 256, "tokens per calibration window (BOS first)")
	f.IntVarP(&threads, "threads", "t", runtime.GOMAXPROCS(0), "threads of the calibration passes")
	return cmd
}

// loadRecipe reads a preset name or a recipe file.
// A preset name wins over a file of the same name in the working folder.
func loadRecipe(arg string) (quant.Recipe, error) {
	if r, err := quant.Preset(arg); err == nil {
		return r, nil
	}
	if st, err := os.Stat(arg); err == nil && st.Mode().IsRegular() {
		return quant.LoadRecipe(arg)
	}
	return quant.Recipe{}, fmt.Errorf("recipe %q is neither a preset (%s) nor a recipe file", arg, strings.Join(quant.PresetNames(), ", "))
}

// isTerminal reports whether w is a terminal (progress bars draw only there).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// withLPBQMode sets the mode of every LPBQ scheme of the recipe.
func withLPBQMode(r quant.Recipe, mode quant.LPBQMode) quant.Recipe {
	if r.Default.Kind == quant.KindLPBQ {
		r.Default.Mode = mode
	}
	over := make([]quant.Override, len(r.Overrides))
	copy(over, r.Overrides)
	for i := range over {
		if over[i].Scheme.Kind == quant.KindLPBQ {
			over[i].Scheme.Mode = mode
		}
	}
	r.Overrides = over
	r.Name += "+reference"
	return r
}
