package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"

	"github.com/dustin/go-humanize"
	"github.com/spf13/cobra"

	"github.com/aotlm/aotlm/internal/load"
	"github.com/aotlm/aotlm/internal/progress"
)

const hubEnvHelp = `The Hub is reached as huggingface_hub does: HF_ENDPOINT (a mirror; default
https://huggingface.co), HF_TOKEN (or the token file of huggingface-cli login)
for gated and private repositories (sent to the endpoint's host only),
HF_HUB_OFFLINE=1 to use the cache only, HF_HUB_DOWNLOAD_TIMEOUT (seconds
without a byte before a request fails; default 60).
Files go to the Hugging Face cache ($HF_HUB_CACHE, else $HF_HOME/hub, else
~/.cache/huggingface/hub) in its own layout, shared with Python tools.`

func newPullCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "pull ORG/NAME[@REVISION][:QUANT]",
		Short: "Download a model from the Hugging Face Hub into the shared cache",
		Long: `Download a model repository from the Hugging Face Hub: only what a model
needs (config.json, generation_config.json, tokenizer files, the safetensors
shards and their index), several files at a time, each resumable and
verified against the Hub's sha256 or git blob id. For a repository of GGUF
files, QUANT picks one by its quantization tag (Q4_K_M when there are several
and none is named). An interrupted pull resumes where it stopped; files
already in the cache are not fetched again. The snapshot's path is printed
on stdout.

` + hubEnvHelp,
		Example: `  aotlm pull Qwen/Qwen3-0.6B
  aotlm pull unsloth/Qwen3-0.6B-GGUF:Q4_K_M
  aotlm pull meta-llama/Llama-3.2-1B@main`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			res, err := pullRef(args[0], cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			if asJSON {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(res)
			}
			// the path ends in a file name the server chose
			fmt.Fprintln(cmd.OutOrStdout(), load.Printable(res.Model))
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the snapshot (repo, commit, folder, files, bytes fetched) as JSON")
	return cmd
}

// resolveModelArg turns a model argument into a path: an existing file or
// folder is used as it is; otherwise a Hub reference (org/name[@rev][:QUANT])
// is pulled into the cache (progress on stderr) and its snapshot path
// returned — the GGUF file for a GGUF pick, else the snapshot folder.
func resolveModelArg(arg string, stderr io.Writer) (string, error) {
	if !load.IsHubRef(arg) {
		return arg, nil
	}
	res, err := pullRef(arg, stderr)
	if err != nil {
		return "", fmt.Errorf("%w (and there is no file or folder named %q)", err, arg)
	}
	return res.Model, nil
}

// pullRef pulls a reference with the environment's Hub settings, drawing
// progress bars on stderr when it is a terminal. Ctrl-C stops the pull and
// keeps the partial files for the next one to resume.
func pullRef(arg string, stderr io.Writer) (*load.PullResult, error) {
	var bars *progress.Downloads
	var shown load.PullProgress
	if progress.IsTerminal(stderr) {
		bars = progress.NewDownloads(stderr)
		shown = bars
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	ref, res, err := load.Pull(ctx, arg, shown)
	if bars != nil {
		bars.Finish()
	}
	if err != nil {
		return nil, err
	}
	switch {
	case res.Cached:
		fmt.Fprintf(stderr, "%s: using the cached snapshot %s (the Hub was not asked)\n", ref, short(res.Commit))
	case res.Fetched > 0:
		fmt.Fprintf(stderr, "%s: fetched %s, snapshot %s\n", ref, humanize.IBytes(uint64(res.Fetched)), short(res.Commit))
	}
	return res, nil
}

func short(commit string) string { return commit[:min(len(commit), 12)] }
