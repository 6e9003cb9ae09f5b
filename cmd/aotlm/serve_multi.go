package main

import (
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/aotlm/aotlm"
	"github.com/aotlm/aotlm/internal/limits"
	"github.com/aotlm/aotlm/internal/load"
	"github.com/aotlm/aotlm/serve"
)

// multiServe is what serve needs to serve several models.
type multiServe struct {
	paths        []string // -m, repeated
	dir          string   // --models-dir
	open         openOptions
	templatePath string
	opts         serve.Options
	maxMemory    string
	multi        serve.MultiOptions
	host         string
	port         int
}

// modelsIn lists the models of a folder: its .aot and .gguf files and its
// subfolders (checkpoints), by name.
func modelsIn(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("--models-dir: %w", err)
	}
	var out []string
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, ".") {
			continue
		}
		if e.IsDir() || strings.HasSuffix(name, ".aot") || strings.HasSuffix(name, ".gguf") {
			out = append(out, filepath.Join(dir, name))
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("--models-dir %s: no .aot or .gguf file and no model folder in it", dir)
	}
	sort.Strings(out)
	return out, nil
}

// pathBytes is the size of a model file, or of a folder's files.
func pathBytes(path string) int64 {
	var n int64
	filepath.WalkDir(path, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if info, err := d.Info(); err == nil {
				n += info.Size()
			}
		}
		return nil
	})
	return n
}

// run serves the models until an interrupt.
func (ms *multiServe) run(cmd *cobra.Command, log io.Writer) error {
	paths := ms.paths
	if ms.dir != "" {
		more, err := modelsIn(ms.dir)
		if err != nil {
			return err
		}
		paths = append(paths, more...)
	}
	if ms.maxMemory != "" {
		n, err := limits.ParseSize(ms.maxMemory)
		if err != nil || n <= 0 {
			return fmt.Errorf("--max-memory %q: want a size such as 6G", ms.maxMemory)
		}
		ms.multi.MaxMemory = n
	}
	var sources []serve.ModelSource
	for _, p := range paths {
		p := p
		id := filepath.Base(strings.TrimRight(p, "/"))
		sources = append(sources, serve.ModelSource{ID: id, Bytes: pathBytes(p), Open: func() (*aotlm.Model, error) {
			m, err := openModel(p, ms.open)
			if err != nil {
				return nil, err
			}
			if ms.templatePath != "" {
				if err := load.SetChatTemplate(m, ms.templatePath); err != nil {
					m.Close()
					return nil, err
				}
			}
			return m, nil
		}})
	}
	mu, err := serve.NewMulti(sources, ms.opts, ms.multi)
	if err != nil {
		return err
	}
	defer mu.Close()
	ln, err := net.Listen("tcp", net.JoinHostPort(ms.host, strconv.Itoa(ms.port)))
	if err != nil {
		return err
	}
	budget := ms.multi.MaxMemory
	if budget == 0 {
		budget = serve.DefaultMaxMemory()
	}
	fmt.Fprintf(log, "serving %d models (loaded on first use, within %s) on http://%s\n", len(sources), limits.Bytes(budget), ln.Addr())
	sigCtx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return mu.Serve(sigCtx, ln, log)
}
