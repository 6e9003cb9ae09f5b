package main

import (
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/aotlm/aotlm/internal/compile"
	"github.com/aotlm/aotlm/serve"
)

func newServeCmd() *cobra.Command {
	var (
		mf                         *modelFlags
		host, apiKey, name, mmproj string
		allowLocalImages           bool
		port, parallel, queue      int
		maxBody                    int64
	)
	cmd := &cobra.Command{
		Use:   "serve -m MODEL",
		Short: "Serve a model over the OpenAI, Anthropic and Ollama HTTP APIs, with a web chat",
		Long: `Serve a model over HTTP: the OpenAI API (/v1/chat/completions,
/v1/completions, /v1/responses, /v1/models, with streaming), Anthropic's
Messages API (/v1/messages, /v1/messages/count_tokens), Ollama's API
(/api/chat, /api/generate, /api/tags, /api/show, /api/ps, /api/version),
/health, /metrics (Prometheus text), /tokenize and /detokenize, and a web
chat page at /.

Up to --parallel requests generate at once, each on its own session of the
one mapped model; up to --queue more wait, and beyond that the server answers
503 with Retry-After. A request whose prompt extends an earlier one (the same
conversation, one turn longer) takes the session that holds it and prefills
only the new tokens. It listens on 127.0.0.1 unless --host says otherwise;
with --api-key every API request must carry "Authorization: Bearer KEY" (or
"X-Api-Key: KEY", as Anthropic's clients send it).
MODEL is taken as by "aotlm run" (a checkpoint compiles into the cache).

A vision-language model (a SmolVLM, Qwen2-VL or InternVL folder or artifact, or a text GGUF with --mmproj)
reads images in chat messages: OpenAI "image_url" content parts with data:
URLs (data:image/png;base64,...), and file paths or file:// URLs when started
with --allow-local-images.`,
		Example: `  aotlm serve -m qwen3-0.6b.aot --port 8080 --parallel 4
  curl http://127.0.0.1:8080/v1/chat/completions -H 'Content-Type: application/json' \
    -d '{"messages": [{"role": "user", "content": "Hello"}]}'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkServeFlags(port, parallel, queue, maxBody); err != nil {
				return err
			}
			log := cmd.ErrOrStderr()
			m, err := mf.open(log, log, compile.Options{})
			if err != nil {
				return err
			}
			defer m.Close()
			if name == "" {
				// the name the user gave, not the compile cache's file
				name = filepath.Base(strings.TrimRight(mf.path, "/"))
			}
			opts := serve.Options{Parallel: parallel, Queue: queue, Context: min(mf.ctx, m.Info().Context),
				APIKey: apiKey, MaxBodyBytes: maxBody, ModelID: name, AllowLocalImages: allowLocalImages}
			if p, err := openPrompter(mf.path, mmproj, m, mf.threads, mf.visionLlamaCpp); err != nil {
				return err
			} else if p != nil {
				opts.Images = p.ServeImages()
			}
			srv, err := serve.New(m, opts)
			if err != nil {
				return err
			}
			defer srv.Close()
			ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
			if err != nil {
				return err
			}
			fmt.Fprintf(log, "serving %s (context %d, %d parallel) on http://%s\n", name, srv.ContextSize(), max(parallel, 1), ln.Addr())
			sigCtx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return srv.Serve(sigCtx, ln, log)
		},
	}
	f := cmd.Flags()
	mf = addModelFlags(f, "model: a compiled artifact (.aot), a checkpoint or a Hub repository org/name[:QUANT] (default: the built-in demo model)")
	f.StringVar(&host, "host", "127.0.0.1", "address to listen on (0.0.0.0: every interface)")
	f.IntVar(&port, "port", 8080, "port to listen on (0: any free port)")
	f.IntVar(&parallel, "parallel", 1, "requests that generate at once, each on its own session")
	f.IntVar(&queue, "queue", 0, "requests that may wait for a session beyond --parallel (0: 4 per session, -1: none)")
	f.StringVar(&apiKey, "api-key", "", "require this key on API requests (Authorization: Bearer or X-Api-Key)")
	f.StringVar(&name, "name", "", "the model's id in the API (default: the model's file or folder name)")
	f.Int64Var(&maxBody, "max-body", 4<<20, "largest request body in bytes")
	f.StringVar(&mmproj, "mmproj", "", "llama.cpp's vision GGUF (mmproj) for a text GGUF given with -m: chat messages may hold images")
	f.BoolVar(&allowLocalImages, "allow-local-images", false, "let image parts name files of this machine (paths, file:// URLs), not only data: URLs")
	return cmd
}

// checkServeFlags validates serve's numeric flags before the model is
// read.
func checkServeFlags(port, parallel, queue int, maxBody int64) error {
	switch {
	case port < 0 || port > 65535:
		return fmt.Errorf("--port %d: want 0 (any free port) to 65535", port)
	case parallel < 1:
		return fmt.Errorf("--parallel %d: want at least 1 session", parallel)
	case queue < -1:
		return fmt.Errorf("--queue %d: want a number of waiting requests, 0 for 4 per session or -1 for none", queue)
	case maxBody < 1:
		return fmt.Errorf("--max-body %d: want a number of bytes", maxBody)
	}
	return nil
}
