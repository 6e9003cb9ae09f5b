package main

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/dustin/go-humanize"
	"github.com/spf13/cobra"

	"github.com/aotlm/aotlm/internal/load"
)

func newListCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "Show pulled models and compiled artifacts with their sizes",
		Long: `Show the models in the Hugging Face cache (pulled by aotlm or by Python
tools) and the compiled artifacts in the compile cache ($AOTLM_CACHE, default
the user cache folder), with their sizes on disk, and counts the temporary
files that killed compiles left there (the next compile of the same model
removes them).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := load.ListCaches()
			if err != nil {
				return err
			}
			if asJSON {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(c)
			}
			if err := c.Write(cmd.OutOrStdout()); err != nil {
				return err
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "models in %s, artifacts in %s\n", c.HubDir, c.ArtifactDir)
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object")
	return cmd
}

func newRmCmd() *cobra.Command {
	var allArtifacts bool
	cmd := &cobra.Command{
		Use:   "rm [ORG/NAME | ARTIFACT.aot]...",
		Short: "Remove pulled models or compiled artifacts",
		Long: `Remove models from the Hugging Face cache (every revision of the repository)
or compiled artifacts from the compile cache, by the names aotlm list shows.
--artifacts removes every compiled artifact.`,
		Example: `  aotlm rm Qwen/Qwen3-0.6B
  aotlm rm 3f2a9c0d1e.aot
  aotlm rm --artifacts`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 && !allArtifacts {
				return errors.New("rm: name a model or an artifact (see aotlm list), or pass --artifacts")
			}
			c, err := load.OpenCaches()
			if err != nil {
				return err
			}
			removed := func(name string, size int64) {
				fmt.Fprintf(cmd.ErrOrStderr(), "removed %s (%s)\n", name, humanize.IBytes(uint64(size)))
			}
			if allArtifacts {
				if err := c.RemoveArtifacts(removed); err != nil {
					return fmt.Errorf("rm: %w", err)
				}
			}
			for _, arg := range args {
				var nc *load.NotCachedError
				err := c.Remove(arg, removed)
				switch {
				case errors.As(err, &nc) && nc.Repo == "":
					return fmt.Errorf("rm: %v (see aotlm list)", err)
				case err != nil:
					return fmt.Errorf("rm: %w", err)
				}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&allArtifacts, "artifacts", false, "remove every compiled artifact")
	return cmd
}
