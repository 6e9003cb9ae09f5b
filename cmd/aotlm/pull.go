package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/dustin/go-humanize"
	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"

	"github.com/aotlm/aotlm/internal/load"
)

const hubEnvHelp = `The Hub is reached as huggingface_hub does: HF_ENDPOINT (a mirror; default
https://huggingface.co), HF_TOKEN (or the token file of huggingface-cli login)
for gated and private repositories, HF_HUB_OFFLINE=1 to use the cache only.
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
			fmt.Fprintln(cmd.OutOrStdout(), res.Model)
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
	var bars *pullBars
	var progress load.PullProgress
	if isTerminal(stderr) {
		bars = newPullBars(stderr)
		progress = bars
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	ref, res, err := load.Pull(ctx, arg, progress)
	if bars != nil {
		bars.finish()
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

// pullBars draws one progress bar per file being downloaded and one for the
// total, redrawing them in place on a terminal.
type pullBars struct {
	w     io.Writer
	mu    sync.Mutex
	total *progressbar.ProgressBar
	files map[string]*progressbar.ProgressBar
	order []string
	done  map[string]bool
	lines int
	stop  chan struct{}
	wg    sync.WaitGroup
}

func newPullBars(w io.Writer) *pullBars {
	return &pullBars{w: w, files: map[string]*progressbar.ProgressBar{}, done: map[string]bool{}, stop: make(chan struct{})}
}

func newBar(size int64, desc string) *progressbar.ProgressBar {
	return progressbar.NewOptions64(size, progressbar.OptionSetWriter(io.Discard), progressbar.OptionSetDescription(desc),
		progressbar.OptionShowBytes(true), progressbar.OptionSetWidth(30), progressbar.OptionThrottle(0),
		progressbar.OptionSetPredictTime(true), progressbar.OptionShowCount())
}

// Plan implements load.PullProgress.
func (b *pullBars) Plan(paths []string, sizes []int64) {
	if len(paths) == 0 {
		return
	}
	var total int64
	width := 0
	for _, p := range paths {
		width = max(width, len(p))
	}
	width = min(width, 40)
	b.mu.Lock()
	for i, p := range paths {
		name := p
		if len(name) > width {
			name = "…" + name[len(name)-width+1:]
		}
		b.files[p] = newBar(sizes[i], fmt.Sprintf("%-*s", width, name))
		b.order = append(b.order, p)
		total += sizes[i]
	}
	sort.Strings(b.order)
	b.total = newBar(total, fmt.Sprintf("%-*s", width, "total"))
	b.mu.Unlock()
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		t := time.NewTicker(150 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-b.stop:
				b.draw()
				return
			case <-t.C:
				b.draw()
			}
		}
	}()
}

// Advance implements load.PullProgress.
func (b *pullBars) Advance(file string, n int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if bar := b.files[file]; bar != nil {
		cur := bar.State().CurrentNum
		bar.Set64(max(cur+n, 0))
		b.total.Add64(max(cur+n, 0) - cur)
	}
}

// Done implements load.PullProgress.
func (b *pullBars) Done(file string, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.done[file] = true
}

// draw rewrites the bars of unfinished files (at most 8) and the total.
func (b *pullBars) draw() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.total == nil {
		return
	}
	var sb strings.Builder
	if b.lines > 0 {
		fmt.Fprintf(&sb, "\x1b[%dA", b.lines)
	}
	n := 0
	for _, f := range b.order {
		if b.done[f] || n == 8 {
			continue
		}
		bar := b.files[f]
		if bar.State().CurrentNum == 0 {
			continue // waiting for a download slot
		}
		fmt.Fprintf(&sb, "\r\x1b[2K%s\n", bar.String())
		n++
	}
	fmt.Fprintf(&sb, "\r\x1b[2K%s\n", b.total.String())
	n++
	for i := n; i < b.lines; i++ { // clear lines left from a longer frame
		sb.WriteString("\r\x1b[2K\n")
	}
	if b.lines > n {
		fmt.Fprintf(&sb, "\x1b[%dA", b.lines-n)
	}
	b.lines = n
	io.WriteString(b.w, sb.String())
}

func (b *pullBars) finish() {
	b.mu.Lock()
	started := b.total != nil
	b.mu.Unlock()
	if started {
		close(b.stop)
		b.wg.Wait()
	}
}
