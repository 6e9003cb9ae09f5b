package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/dustin/go-humanize"
	"github.com/spf13/cobra"

	"github.com/aotlm/aotlm/internal/compile"
	"github.com/aotlm/aotlm/internal/hf/hub"
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
			hubDir, err := hub.DefaultCacheDir()
			if err != nil {
				return err
			}
			repos, err := hub.List(hubDir)
			if err != nil {
				return err
			}
			artDir, arts, err := compile.CachedArtifacts()
			if err != nil {
				return err
			}
			if asJSON {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(map[string]any{
					"hub_cache": hubDir, "models": repos, "compile_cache": artDir, "artifacts": arts})
			}
			out := cmd.OutOrStdout()
			w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
			fmt.Fprintf(w, "MODEL\tSIZE\tREVISION\tFILES\n")
			for _, r := range repos {
				rev := ""
				if c, ok := r.Refs["main"]; ok {
					rev = "main " + short(c)
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
			fmt.Fprintf(cmd.ErrOrStderr(), "models in %s, artifacts in %s\n", hubDir, artDir)
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
			hubDir, err := hub.DefaultCacheDir()
			if err != nil {
				return err
			}
			_, arts, err := compile.CachedArtifacts()
			if err != nil {
				return err
			}
			removeArtifact := func(a compile.CachedArtifact) error {
				if err := os.Remove(a.Path); err != nil {
					return fmt.Errorf("rm: %w", err)
				}
				fmt.Fprintf(cmd.ErrOrStderr(), "removed %s (%s)\n", a.Name, humanize.IBytes(uint64(a.Size)))
				return nil
			}
			if allArtifacts {
				for _, a := range arts {
					if err := removeArtifact(a); err != nil {
						return err
					}
				}
			}
			for _, arg := range args {
				found := false
				for _, a := range arts {
					if arg == a.Name || arg+".aot" == a.Name {
						found = true
						if err := removeArtifact(a); err != nil {
							return err
						}
					}
				}
				if found {
					continue
				}
				ref, err := hub.ParseRef(arg)
				if err != nil {
					return fmt.Errorf("rm: %q is neither a cached model nor an artifact (see aotlm list)", arg)
				}
				repos, _ := hub.List(hubDir)
				var size int64
				for _, r := range repos {
					if r.Repo == ref.Repo {
						size = r.Size
					}
				}
				ok, err := hub.Remove(hubDir, ref.Repo)
				if err != nil {
					return fmt.Errorf("rm: %w", err)
				}
				if !ok {
					return fmt.Errorf("rm: %s is not in the cache %s", ref.Repo, hubDir)
				}
				fmt.Fprintf(cmd.ErrOrStderr(), "removed %s (%s)\n", ref.Repo, humanize.IBytes(uint64(size)))
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&allArtifacts, "artifacts", false, "remove every compiled artifact")
	return cmd
}
