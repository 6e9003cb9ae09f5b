package main

import (
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/aotlm/aotlm/internal/compile"
	"github.com/aotlm/aotlm/internal/limits"
	"github.com/aotlm/aotlm/internal/load"
	"github.com/aotlm/aotlm/serve"
)

func newServeCmd() *cobra.Command {
	var (
		modelPath, tokPath, host, templatePath, mode, kv, name string
		mmproj, slotDir, modelsDir, maxMemory, promptCache     string
		modelPaths                                             []string
		idleUnload                                             time.Duration
		apiKeys, hostAllow, corsOrigins                        []string
		allowLocalImages, sharedCache                          bool
		readTimeout, workTimeout                               time.Duration
		port, parallel, queue, ctx, threads, arLen             int
		hugePages                                              bool
		maxBody                                                int64
	)
	cmd := &cobra.Command{
		Use:   "serve -m MODEL",
		Short: "Serve a model over an OpenAI-compatible HTTP API, with a web chat",
		Long: `Serve a model over HTTP: the OpenAI API (/v1/chat/completions,
/v1/completions, /v1/models, with streaming), /health, /metrics (Prometheus
text), /tokenize and /detokenize, and a web chat page at /.

Up to --parallel requests generate at once, each on its own session of the
one mapped model; up to --queue more wait, and beyond that the server answers
503 with Retry-After. A request whose prompt extends an earlier one (the same
conversation, one turn longer) takes the session that holds it and prefills
only the new tokens. It listens on 127.0.0.1 unless --host says otherwise;
with --api-key every API request must carry "Authorization: Bearer KEY".

Requests whose Host header is not an IP address, localhost, the machine's
name or a --host-allow name are refused (403), and so are browser requests
from another site's pages unless --cors-origin lists their origin. A request
reuses only the cache of its own API key (or, without a key, its own client
address) unless --shared-cache is given. Special-token text in user and tool
messages is read as plain text: only the chat template writes role markers.
MODEL is taken as by "aotlm run" (a checkpoint compiles into the cache).

A vision-language model (a SmolVLM or Qwen2-VL folder or artifact, or a text GGUF with --mmproj)
reads images in chat messages: OpenAI "image_url" content parts with data:
URLs (data:image/png;base64,...), and file paths or file:// URLs when started
with --allow-local-images.`,
		Example: `  aotlm serve -m qwen3-0.6b.aot --port 8080 --parallel 4
  curl http://127.0.0.1:8080/v1/chat/completions -H 'Content-Type: application/json' \
    -d '{"messages": [{"role": "user", "content": "Hello"}]}'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkServeFlags(port, parallel, queue, &ctx, threads, maxBody); err != nil {
				return err
			}
			if readTimeout <= 0 || workTimeout <= 0 {
				return fmt.Errorf("--read-timeout %v, --work-timeout %v: want durations above zero", readTimeout, workTimeout)
			}
			var err error
			log := cmd.ErrOrStderr()
			opts := serve.Options{Parallel: parallel, Queue: queue, APIKeys: apiKeys, MaxBodyBytes: maxBody,
				AllowLocalImages: allowLocalImages, HostAllow: hostAllow, CORSOrigins: corsOrigins, SharedCache: sharedCache,
				ReadTimeout: readTimeout, WorkTimeout: workTimeout, SlotSaveDir: slotDir}
			if promptCache != "" {
				n, err := limits.ParseSize(promptCache)
				if err != nil {
					return fmt.Errorf("--prompt-cache: %w", err)
				}
				opts.PromptCacheBytes = n
			}
			oo := openOptions{Tokenizer: tokPath, Threads: threads, Mode: mode, HugePages: hugePages,
				Compile: compile.Options{ARLens: []int{arLen}, Ctx: ctx, ClampCtx: true, KV: kv}, Log: log}
			if len(modelPaths) > 1 || modelsDir != "" {
				if mmproj != "" || name != "" {
					return fmt.Errorf("--mmproj and --name name one model: serve a vision model or a renamed one on its own")
				}
				if ctx < 1<<30 {
					opts.Context = ctx
				}
				ms := &multiServe{paths: modelPaths, dir: modelsDir, open: oo, templatePath: templatePath, opts: opts,
					maxMemory: maxMemory, multi: serve.MultiOptions{IdleUnload: idleUnload}, host: host, port: port}
				return ms.run(cmd, log)
			}
			if len(modelPaths) == 1 {
				modelPath = modelPaths[0]
			}
			if modelPath, err = resolveModel(modelPath, log); err != nil {
				return err
			}
			m, err := openModel(modelPath, oo)
			if err != nil {
				return err
			}
			defer m.Close()
			if templatePath != "" {
				if err := load.SetChatTemplate(m, templatePath); err != nil {
					return err
				}
			}
			if name == "" {
				// the name the user gave, not the compile cache's file
				name = filepath.Base(strings.TrimRight(modelPath, "/"))
			}
			opts.Context, opts.ModelID = min(ctx, m.Info().Context), name
			if p, err := openPrompter(modelPath, mmproj, m, threads); err != nil {
				return err
			} else if p != nil {
				opts.Images = servePrompts{p}
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
	f.StringArrayVarP(&modelPaths, "model", "m", nil, "model: a compiled artifact (.aot) or a checkpoint (default: the built-in demo model); repeat for several models, each loaded on its first request")
	f.StringVar(&modelsDir, "models-dir", "", "serve every model of this folder (.aot and .gguf files, checkpoint folders), each loaded on its first request")
	f.StringVar(&maxMemory, "max-memory", "", "with several models: the memory the loaded ones may take (such as 6G; default: half the machine's memory within the process's limits); the least recently used idle model is unloaded to make room")
	f.DurationVar(&idleUnload, "idle-unload", 0, "with several models: unload a model no request used for this long (0: never)")
	f.StringVar(&tokPath, "tokenizer", "", "tokenizer file or folder, for checkpoints without one")
	f.StringVar(&host, "host", "127.0.0.1", "address to listen on (0.0.0.0: every interface)")
	f.IntVar(&port, "port", 8080, "port to listen on (0: any free port)")
	f.IntVar(&parallel, "parallel", 1, "requests that generate at once, each on its own session")
	f.IntVar(&queue, "queue", 0, "requests that may wait for a session beyond --parallel (0: 4 per session, -1: none)")
	f.IntVarP(&ctx, "ctx", "c", load.Ctx, "context of each session (capped at the model's)")
	f.IntVarP(&threads, "threads", "t", runtime.GOMAXPROCS(0), "threads, shared by the sessions")
	f.BoolVar(&hugePages, "hugepages", false, hugePagesUsage)
	f.StringVar(&mode, "mode", "hybrid", "prefill: hybrid (AR-N passes) or kv (one token at a time)")
	f.StringArrayVar(&apiKeys, "api-key", nil, "require this Bearer token on API requests (repeat for several keys; each key reuses only its own cache)")
	f.StringArrayVar(&hostAllow, "host-allow", nil, "accept this name in the Host header besides IP addresses, localhost and the machine's name (repeatable; .example.com: its subdomains; *: any)")
	f.StringArrayVar(&corsOrigins, "cors-origin", nil, "let pages of this origin (http://app.example) call the API from a browser, with CORS (repeatable; *: any)")
	f.BoolVar(&sharedCache, "shared-cache", false, "let every client reuse (and see in cached_tokens) every session's cache, not only its own key's or address's")
	f.StringVar(&promptCache, "prompt-cache", "", "keep sessions taken by another conversation in memory up to this size (such as 512M), so their conversations continue without prefilling again")
	f.StringVar(&slotDir, "slot-save-path", "", "folder where POST /slots/{id}?action=save|restore writes and reads sessions (off without it)")
	f.DurationVar(&readTimeout, "read-timeout", time.Minute, "longest time a request body may take to arrive")
	f.DurationVar(&workTimeout, "work-timeout", 5*time.Second, "longest time a request's preparation (compiling a JSON schema) may take")
	f.StringVar(&templatePath, "chat-template", "", "Jinja chat template file, replacing the model's")
	f.StringVar(&name, "name", "", "the model's id in the API (default: the model's file or folder name)")
	f.Int64Var(&maxBody, "max-body", 4<<20, "largest request body in bytes")
	f.IntVar(&arLen, "ar-len", load.ARLen, "prompt pass length when compiling a checkpoint")
	f.StringVar(&kv, "kv", load.KV, "KV cache storage when compiling a checkpoint: f32, f16 or u8")
	f.StringVar(&mmproj, "mmproj", "", "llama.cpp's vision GGUF (mmproj) for a text GGUF given with -m: chat messages may hold images")
	f.BoolVar(&allowLocalImages, "allow-local-images", false, "let image parts name files of this machine (paths, file:// URLs), not only data: URLs")
	return cmd
}

// checkServeFlags validates serve's numeric flags before the model is
// read; ctx 0 becomes the model's context.
func checkServeFlags(port, parallel, queue int, ctx *int, threads int, maxBody int64) error {
	switch {
	case port < 0 || port > 65535:
		return fmt.Errorf("--port %d: want 0 (any free port) to 65535", port)
	case parallel < 1:
		return fmt.Errorf("--parallel %d: want at least 1 session", parallel)
	case queue < -1:
		return fmt.Errorf("--queue %d: want a number of waiting requests, 0 for 4 per session or -1 for none", queue)
	case *ctx < 0:
		return fmt.Errorf("--ctx %d: want a number of positions, or 0 for the model's context", *ctx)
	case threads < 1:
		return fmt.Errorf("-t %d: want at least 1 thread", threads)
	case maxBody < 1:
		return fmt.Errorf("--max-body %d: want a number of bytes", maxBody)
	}
	if *ctx == 0 {
		*ctx = 1 << 30
	}
	return nil
}
