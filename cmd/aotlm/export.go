package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/aotlm/aotlm/internal/load"
	"github.com/aotlm/aotlm/internal/onnxexport"
)

func newExportCmd() *cobra.Command {
	var out, format, act, calib string
	var arLen, ctx int
	cmd := &cobra.Command{
		Use:   "export MODEL -o DIR --format onnx",
		Short: "Write a model as ONNX prefill and decode graphs (QDQ for NPUs)",
		Long:  help("export"),
		Example: `  aotlm export q/ -o onnx/ --format onnx --ar-len 32 --ctx 512
  aotlm export stories260K.gguf -o onnx-f32/ --format onnx --activations float`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if format != "onnx" {
				return fmt.Errorf("export: --format %q: the one format is onnx", format)
			}
			if out == "" {
				return fmt.Errorf("export: -o DIR is required")
			}
			s, err := onnxexport.ExportPath(args[0], out, onnxexport.PathOptions{
				ARLen: arLen, Context: ctx, Activations: act, CalibText: calib, Producer: "aotlm " + version})
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: %s graphs AR-%d and AR-1, context %d, %s weights, %s activations",
				out, s.Family, s.ARLen, s.Context, s.Weights, s.Activations)
			if s.Calibrated != "" {
				fmt.Fprintf(cmd.OutOrStdout(), " (ranges: %s)", s.Calibrated)
			}
			fmt.Fprintln(cmd.OutOrStdout())
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVarP(&out, "output", "o", "", "output folder")
	f.StringVar(&format, "format", "onnx", "output format (onnx)")
	f.StringVar(&act, "activations", "", "qdq (16-bit linear inputs, uint8 cache) or float; default qdq for a quantized folder")
	f.StringVar(&calib, "calib", "", "a text whose first --ctx tokens give the 16-bit ranges and cache scales")
	f.IntVar(&arLen, "ar-len", load.ARLen, "tokens per prefill pass (the AR-N graph)")
	f.IntVarP(&ctx, "ctx", "c", 0, "KV cache positions (0: 1024, or the model's trained context if shorter)")
	return cmd
}
