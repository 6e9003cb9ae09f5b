// Command aotlm takes a language model from a checkpoint to fast local
// inference: pull, quantize, compile, run, bench, ppl, serve, inspect.
// Each subcommand lives in its own file: flags in, one library call, output.
package main

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
)

func main() {
	removeTempsOnSignal()
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run executes the command line and returns the exit code: 0 on success,
// 1 on an error (printed as one line on stderr), 2 on an internal fault.
func run(args []string, stdout, stderr io.Writer) (code int) {
	return runWithInput(args, os.Stdin, stdout, stderr)
}

// runWithInput runs the command line with stdin as its input.
func runWithInput(args []string, stdin io.Reader, stdout, stderr io.Writer) (code int) {
	defer func() {
		if r := recover(); r != nil {
			fmt.Fprintf(stderr, "aotlm: internal error: %v\n", r)
			code = 2
		}
	}()
	root := newRoot(stdout, stderr)
	root.SetIn(stdin)
	root.SetArgs(llamaFlags(args))
	if err := root.Execute(); err != nil {
		fmt.Fprintf(stderr, "aotlm: %v\n", err)
		return 1
	}
	return 0
}

func newRoot(stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:   "aotlm",
		Short: "Run language models on the device in front of you",
		Long: `aotlm takes a language model from a checkpoint (GGUF, llama2.c, or a Hugging Face
folder with config.json and safetensors) to fast, private inference on CPUs,
phone-class arm64 first. One static binary, no Python.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.PersistentPreRunE = checkModelPaths
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.AddCommand(newVersionCmd(), newRunCmd(), newChatCmd(), newServeCmd(), newTokenizeCmd(), newTemplateCmd(), newPplCmd(), newQuantizeCmd(), newCompileCmd(), newInspectCmd(), newBenchCmd(), newLogitsCmd(),
		newPullCmd(), newListCmd(), newRmCmd(), newEvalCmd(), newTuneCmd(), newExportCmd())
	return root
}

// llamaFlags accepts llama-bench's two-letter single-dash "-pg" by
// rewriting it to "--pg" (the flag library reads "-pg" as "-p g").
func llamaFlags(args []string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		if a == "-pg" || strings.HasPrefix(a, "-pg=") {
			a = "-" + a
		}
		out[i] = a
	}
	return out
}
