package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/aotlm/aotlm/internal/userfile"
)

// modelArgCommands take a model path as their positional arguments.
var modelArgCommands = map[string]bool{"compile": true, "quantize": true, "inspect": true}

// checkModelPaths refuses, before a command runs, a thread count below 1
// and a model path (-m, or the
// positional MODEL of compile, quantize and inspect) that is a named pipe,
// a device or a socket: opening one blocks or reads without end.
func checkModelPaths(cmd *cobra.Command, args []string) error {
	if f := cmd.Flags().Lookup("threads"); f != nil {
		if t, err := cmd.Flags().GetInt("threads"); err == nil && t < 1 {
			return fmt.Errorf("-t %d: want at least 1 thread", t)
		}
	}
	if f := cmd.Flags().Lookup("model"); f != nil && f.Value.String() != "" {
		if err := userfile.CheckModel(f.Value.String()); err != nil {
			return err
		}
	}
	if modelArgCommands[cmd.Name()] {
		for _, a := range args {
			if err := userfile.CheckModel(a); err != nil {
				return err
			}
		}
	}
	return nil
}
