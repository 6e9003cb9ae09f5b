package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"text/tabwriter"

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
the user cache folder), with their sizes on disk.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := load.ListCaches()
			if err != nil {
				return err
			}
			if asJSON {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(c)
			}
			repos, arts := c.Models, c.Artifacts
			out := cmd.OutOrStdout()
			w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
			fmt.Fprintf(w, "MODEL\tSIZE\tREVISION\tFILES\n")
			for _, r := range repos {
				rev := ""
				if commit, ok := r.Refs["main"]; ok {
					rev = "main " + short(commit)
				} else if len(r.Snapshots) > 0 {
					rev = short(r.Snapshots[0])
				}
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", r.Repo, humanize.IBytes(uint64(r.Size)), rev, summarizeFiles(r.Files))
			}
			if len(repos) == 0 {
				fmt.Fprintf(w, "(none)\n")
			}
			if err := w.Flush(); err != nil {
				return err
			}
			fmt.Fprintln(out)
			w = tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
			fmt.Fprintf(w, "ARTIFACT\tSIZE\tCOMPILED\n")
			for _, a := range arts {
				fmt.Fprintf(w, "%s\t%s\t%s\n", a.Name, humanize.IBytes(uint64(a.Size)), a.Modified.Format("2006-01-02 15:04"))
			}
			if len(arts) == 0 {
				fmt.Fprintf(w, "(none)\n")
			}
			if err := w.Flush(); err != nil {
				return err
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "models in %s, artifacts in %s\n", c.HubDir, c.ArtifactDir)
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object")
	return cmd
}

// summarizeFiles names the weight files of a snapshot (GGUF or safetensors)
// and counts the rest.
func summarizeFiles(files []string) string {
	var weights []string
	for _, f := range files {
		if strings.HasSuffix(f, ".gguf") || strings.HasSuffix(f, ".safetensors") || strings.HasSuffix(f, ".bin") {
			weights = append(weights, f)
		}
	}
	s := strings.Join(weights, ", ")
	if len(weights) > 2 {
		s = fmt.Sprintf("%s … (%d weight files)", weights[0], len(weights))
	}
	if rest := len(files) - len(weights); rest > 0 {
		s += fmt.Sprintf(" +%d", rest)
	}
	return s
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
