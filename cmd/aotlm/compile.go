package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/aotlm/aotlm/internal/compile"
	"github.com/aotlm/aotlm/internal/load"
	"github.com/aotlm/aotlm/internal/output"
	"github.com/aotlm/aotlm/internal/progress"
)

func newCompileCmd() *cobra.Command {
	var (
		out, tokPath                   string
		kv, calib, acts                string
		ggufWeights                    string
		arLen, ctx                     int
		force                          bool
		jobs                           int
		allowNonFinite                 bool
		lookahead, pooling             string
		mmproj, visionW, visionBuckets string
		visionLlamaCpp                 bool
		loras, carry                   []string
	)
	cmd := &cobra.Command{
		Use:   "compile MODEL -o OUT.aot",
		Short: "Compile a model into an artifact the engine runs",
		Long:  help("compile"),
		Example: `  aotlm compile stories260K.gguf -o stories.aot --ar-len 32 --ctx 512
  aotlm compile SmolVLM-256M-Instruct/ -o smolvlm.aot --vision-weights w8
  aotlm compile q4/ --mmproj mmproj.gguf -o vlm.aot      # q4/ from quantize, its recipe's vision weights
  aotlm compile text.gguf --mmproj mmproj.gguf -o vlm.aot
  aotlm compile Qwen2-VL-2B-Instruct/ -o qwen2vl.aot --vision-buckets 448x448,336x448,448x336
  aotlm compile InternVL3-1B/ -o internvl3.aot
  aotlm compile stories260K.bin --tokenizer tok512.bin -o stories.aot
  aotlm compile q/ -o model.aot --kv u8 --calib calib.txt
  aotlm compile Qwen3-0.6B/ --lora my-adapter/:0.8 -o tuned.aot`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if out == "" {
				return errors.New("compile: -o OUT.aot is required")
			}
			if arLen < 1 {
				return fmt.Errorf("compile: --ar-len %d must be at least 1", arLen)
			}
			float, err := load.FloatActivations(acts)
			if err != nil {
				return fmt.Errorf("compile: %w", err)
			}
			src, err := resolveModelArg(args[0], cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			if err := output.Check(out, []string{src, tokPath, calib}, force, false); err != nil {
				return withHints(err)
			}
			if jobs < 0 {
				return fmt.Errorf("compile: --jobs %d: want 0 (one per CPU) or more", jobs)
			}
			if err := load.CheckGGUFWeights(ggufWeights); err != nil {
				return fmt.Errorf("compile: %w", err)
			}
			la, err := load.LookaheadARLen(lookahead)
			if err != nil {
				return fmt.Errorf("compile: %w", err)
			}
			specs, err := load.LoRASpecs(loras)
			if err != nil {
				return fmt.Errorf("compile: %w", err)
			}
			carried, err := load.ParseAdapters(carry)
			if err != nil {
				return fmt.Errorf("compile: %w", err)
			}
			bar := progress.NewTensors(cmd.ErrOrStderr(), "compiling")
			opts := compile.Options{ARLens: []int{arLen, max(la, 1)}, Ctx: ctx, Tokenizer: tokPath, KV: kv, CalibText: calib,
				FloatActivations: float, AllowNonFinite: allowNonFinite, Jobs: jobs, GGUFWeights: ggufWeights, MMProj: mmproj, VisionWeights: visionW, VisionBuckets: visionBuckets,
				VisionLlamaCpp: visionLlamaCpp, Pooling: pooling, LoRA: specs, Carry: carried, Progress: func(p compile.Progress) { bar.Update(p.Done, p.Total, p.Bytes, 0) }}
			if err := compile.CompileFile(src, out, opts); err != nil {
				return withHints(err)
			}
			ggufQuantNote(src, out, ggufWeights, cmd.ErrOrStderr())
			fmt.Fprintf(cmd.ErrOrStderr(), "wrote %s\n", out)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVarP(&out, "output", "o", "", "artifact to write")
	f.IntVar(&arLen, "ar-len", load.ARLen, "tokens per prefill pass (the AR-N plan)")
	f.IntVarP(&ctx, "ctx", "c", 0, "KV cache positions (0: the model's trained context)")
	f.StringVar(&tokPath, "tokenizer", "", "tokenizer file or folder to store instead of the model's own")
	f.StringVar(&kv, "kv", load.KV, "KV cache storage: f32, f16, u8, q4 or q4v (4-bit, rotated per head; q4v: values only)")
	f.StringVar(&calib, "calib", "", "text file for the u8 KV cache calibration (default: a generated sequence)")
	f.StringVar(&acts, "activations", "int8", activationsHelp)
	f.StringVar(&ggufWeights, "gguf-weights", compile.GGUFNative, ggufWeightsHelp)
	f.BoolVar(&force, "force", false, "replace an existing output file")
	f.IntVarP(&jobs, "jobs", "j", 0, jobsHelp)
	f.StringVar(&mmproj, "mmproj", "", "llama.cpp's vision GGUF (mmproj) of a text GGUF: its encoder is compiled into the artifact too")
	f.StringVar(&visionW, "vision-weights", "", visionWeightsHelp)
	f.StringVar(&visionBuckets, "vision-buckets", "", visionBucketsHelp)
	f.BoolVar(&visionLlamaCpp, "vision-llama-cpp", false, visionLlamaCppHelp)
	f.BoolVar(&allowNonFinite, "allow-nonfinite", false, "keep NaN and infinite weights (refused by default)")
	f.StringVar(&pooling, "pooling", "", "make an embedding model pooling its final hidden rows: mean, cls or last; rank makes a yes/no reranker (default the checkpoint's GGUF pooling_type; none for a generative model)")
	f.StringArrayVar(&loras, "lora", nil, loraMergeHelp)
	f.StringArrayVar(&carry, "adapter", nil, "[NAME=]ADAPTER[:SCALE]: a LoRA adapter the artifact carries for run-time choice (run --lora NAME, serve's MODEL:NAME); repeatable")
	f.StringVar(&lookahead, "lookahead", "", "N,W,G: add a plan for lookahead decoding's passes of (W+G)(N-1) rows (rounded up to a power of two)")
	return cmd
}

// withHints tells how to get past an existing output or a KV cache the
// machine cannot hold.
func withHints(err error) error {
	switch {
	case errors.Is(err, output.ErrExists):
		return fmt.Errorf("%w (pass --force to replace it)", err)
	case load.ContextTooLarge(err):
		return fmt.Errorf("%w: pass a smaller --ctx", err)
	}
	return err
}

// visionWeightsHelp documents --vision-weights of compile and run.
const visionWeightsHelp = "how a vision encoder stores its matrices: f16 (binary16 rows; the default unless a quantized folder's recipe says otherwise), w8 (8-bit rows, one scale per row) or f32"

// ggufWeightsHelp documents --gguf-weights of compile and run.
const ggufWeightsHelp = "a GGUF file's quantized weights: native (kept 4-bit where exact, else requantized to 8-bit) or f32 (decoded exactly)"

// activationsHelp documents --activations of compile and run.
const activationsHelp = "activations of quantized linears: int8 (packed weights, fast) or float (exact, slow)"

// loraMergeHelp documents --lora of compile and quantize.
const loraMergeHelp = "DIR[:SCALE]: a LoRA adapter (PEFT folder or llama.cpp GGUF adapter) merged into the weights at SCALE (default 1); repeatable"
