package main

import (
	"github.com/spf13/cobra"

	"github.com/aotlm/aotlm/internal/limits"
)

// modelArgCommands take a model path as their positional arguments.
var modelArgCommands = map[string]bool{"compile": true, "quantize": true, "inspect": true}

// checkModelPaths refuses, before a command runs, a thread count (-t),
// job count (--jobs) or session count (--parallel) outside what the
// machine bounds (limits.MaxThreads, limits.MaxParallel), and a model path
// (-m, or the positional MODEL of compile, quantize and inspect) that is a
// named pipe, a device or a socket: opening one blocks or reads without
// end.
func checkModelPaths(cmd *cobra.Command, args []string) error {
	if t, err := cmd.Flags().GetInt("threads"); err == nil {
		if err := limits.CheckThreads("-t", t); err != nil {
			return err
		}
	}
	if j, err := cmd.Flags().GetInt("jobs"); err == nil && j > 0 {
		if err := limits.CheckThreads("--jobs", j); err != nil {
			return err
		}
	}
	if p, err := cmd.Flags().GetInt("parallel"); err == nil {
		if err := limits.CheckParallel("--parallel", p); err != nil {
			return err
		}
	}
	if f := cmd.Flags().Lookup("model"); f != nil && f.Value.String() != "" {
		if err := limits.CheckInput(f.Value.String()); err != nil {
			return err
		}
	}
	if modelArgCommands[cmd.Name()] {
		for _, a := range args {
			if err := limits.CheckInput(a); err != nil {
				return err
			}
		}
	}
	return nil
}
