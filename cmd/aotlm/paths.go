package main

import (
	"github.com/aotlm/aotlm/internal/load"
	"github.com/spf13/cobra"
)

// checkModelPaths refuses, before a command runs, a thread count (-t),
// job count (--jobs) or session count (--parallel) outside what the
// machine bounds, and a model path (-m, or the positional MODEL of
// compile, quantize and inspect) that is a pipe, a device or a socket
// (load.CheckInputs).
func checkModelPaths(cmd *cobra.Command, args []string) error {
	counts := map[string]int{}
	for flag, name := range map[string]string{"threads": "-t", "jobs": "--jobs", "parallel": "--parallel"} {
		if n, err := cmd.Flags().GetInt(flag); err == nil && (flag != "jobs" || n > 0) {
			counts[name] = n
		}
	}
	var models []string
	if f := cmd.Flags().Lookup("model"); f != nil && f.Value.String() != "" {
		models = append(models, f.Value.String())
	}
	if n := cmd.Name(); n == "compile" || n == "quantize" || n == "inspect" { // MODEL arguments
		models = append(models, args...)
	}
	return load.CheckInputs(counts, models)
}
