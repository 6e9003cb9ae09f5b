package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/aotlm/aotlm"
	"github.com/aotlm/aotlm/internal/compile"
	"github.com/aotlm/aotlm/internal/load"
	"github.com/aotlm/aotlm/serve"
)

func newServeCmd() *cobra.Command {
	var (
		mf                              *modelFlags
		host, name, mmproj, slotDir     string
		draft                           string
		modelsDir                       string
		maxMemory, promptCache          load.Size
		apiKeys, hostAllow, corsOrigins []string
		allowLocalImages, sharedCache   bool
		allowAdapters                   bool
		contextShift                    bool
		idleUnload                      time.Duration
		readTimeout, workTimeout        time.Duration
		port, parallel, queue, draftMax int
		maxBody                         int64
	)
	cmd := &cobra.Command{
		Use:   "serve -m MODEL",
		Short: "Serve a model over the OpenAI, Anthropic and Ollama HTTP APIs, with a web chat",
		Long:  help("serve"),
		Example: `  aotlm serve -m qwen3-0.6b.aot --port 8080 --parallel 4
  curl http://127.0.0.1:8080/v1/chat/completions -H 'Content-Type: application/json' \
    -d '{"messages": [{"role": "user", "content": "Hello"}]}'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkServeFlags(port, parallel, queue, maxBody); err != nil {
				return err
			}
			if readTimeout <= 0 || workTimeout <= 0 {
				return fmt.Errorf("--read-timeout %v, --work-timeout %v: want durations above zero", readTimeout, workTimeout)
			}
			log := cmd.ErrOrStderr()
			opts := serve.Options{Parallel: parallel, Queue: queue, APIKeys: apiKeys, MaxBodyBytes: maxBody,
				AllowLocalImages: allowLocalImages, HostAllow: hostAllow, CORSOrigins: corsOrigins, SharedCache: sharedCache,
				ReadTimeout: readTimeout, WorkTimeout: workTimeout, SlotSaveDir: slotDir, PromptCacheBytes: int64(promptCache),
				ContextShift: contextShift, DraftMax: draftMax}
			if allowAdapters {
				opts.LoadAdapter = load.AdapterLoader(mf.loraStorage())
			}
			srv, err := newServer(mf, modelsDir, name, mmproj, draft, opts, serve.MultiOptions{IdleUnload: idleUnload, MaxMemory: int64(maxMemory)}, log)
			if err != nil {
				return err
			}
			defer srv.Close()
			ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
			if err != nil {
				return err
			}
			fmt.Fprintf(log, "serving on http://%s\n", ln.Addr())
			sigCtx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return srv.Serve(sigCtx, ln, log)
		},
	}
	f := cmd.Flags()
	mf = addModelFlags(f, "model: a compiled artifact (.aot), a checkpoint or a Hub repository org/name[:QUANT] (default: the built-in demo model); "+
		"repeat for several models, each loaded on its first request", true)
	f.StringVar(&modelsDir, "models-dir", "", "serve every model of this folder (.aot and .gguf files, checkpoint folders), each loaded on its first request")
	f.Var(&maxMemory, "max-memory", "with several models: the memory the loaded ones may take (such as 6G; default: half the machine's memory within the process's limits)")
	f.DurationVar(&idleUnload, "idle-unload", 0, "with several models: unload a model no request used for this long (0: never)")
	f.StringVar(&host, "host", "127.0.0.1", "address to listen on (0.0.0.0: every interface)")
	f.IntVar(&port, "port", 8080, "port to listen on (0: any free port)")
	f.IntVar(&parallel, "parallel", 1, "requests that generate at once, each on its own session")
	f.IntVar(&queue, "queue", 0, "requests that may wait for a session beyond --parallel (0: 4 per session, -1: none)")
	f.StringArrayVar(&apiKeys, "api-key", nil, "require this key on API requests (Authorization: Bearer or X-Api-Key; repeatable; each key reuses only its own cache)")
	f.StringArrayVar(&hostAllow, "host-allow", nil, "accept this name in the Host header besides IP addresses, localhost and the machine's name (repeatable; .example.com: its subdomains; *: any)")
	f.StringArrayVar(&corsOrigins, "cors-origin", nil, "let pages of this origin (http://app.example) call the API from a browser, with CORS (repeatable; *: any)")
	f.BoolVar(&contextShift, "context-shift", false, "let requests that fill the context go on, dropping the older half of the tokens after their prompt (n_keep), unless they set context_shift false; usage.context_shift tells what was dropped")
	f.BoolVar(&sharedCache, "shared-cache", false, "let every client reuse (and see in cached_tokens) every session's cache, not only its own key's or address's")
	f.Var(&promptCache, "prompt-cache", "keep sessions taken by another conversation in memory up to this size (such as 512M) to continue them without prefilling again")
	f.StringVar(&slotDir, "slot-save-path", "", "folder where POST /slots/{id}?action=save|restore writes and reads sessions (off without it)")
	f.DurationVar(&readTimeout, "read-timeout", time.Minute, "longest time a request body may take to arrive")
	f.DurationVar(&workTimeout, "work-timeout", 5*time.Second, "longest time a request's preparation (compiling a JSON schema) may take")
	f.StringVar(&name, "name", "", "the model's id in the API (default: the model's file or folder name)")
	f.Int64Var(&maxBody, "max-body", 4<<20, "largest request body in bytes")
	f.StringVar(&mmproj, "mmproj", "", "llama.cpp's vision GGUF (mmproj) for a text GGUF given with -m: chat messages may hold images")
	f.BoolVar(&allowLocalImages, "allow-local-images", false, "let image parts name files of this machine (paths, file:// URLs), not only data: URLs")
	f.StringVar(&draft, "draft", "", "speculative decoding of requests that do not choose their own (the speculative field): a draft model (artifact or checkpoint, its tokenizer the model's), lookup (prompt lookup) or mtp (the model's multi-token-prediction head)")
	f.IntVar(&draftMax, "draft-max", 0, "most tokens drafted per pass by default (0: the strategy's default)")
	f.BoolVar(&allowAdapters, "allow-adapter-loading", false, "let POST /v1/adapters load adapters from paths of this machine, and DELETE /v1/adapters/NAME remove them")
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

// server is a server of one model or of several.
type server interface {
	Serve(ctx context.Context, ln net.Listener, log io.Writer) error
	Close()
}

// newServer opens the one model of mf, or serves several (-m repeated,
// --models-dir) each loaded on its first request.
func newServer(mf *modelFlags, modelsDir, name, mmproj, draft string, opts serve.Options, mo serve.MultiOptions, log io.Writer) (server, error) {
	if err := mf.checkCtx(); err != nil {
		return nil, err
	}
	paths := mf.paths
	if modelsDir != "" {
		more, err := load.ModelsIn(modelsDir)
		if err != nil {
			return nil, err
		}
		paths = append(paths, more...)
	}
	if len(paths) > 1 {
		if mmproj != "" || name != "" || len(mf.loras) > 0 || (draft != "" && draft != serve.SpecLookup) {
			return nil, fmt.Errorf("--mmproj, --name, --lora and --draft (but lookup) name one model: serve a vision model, a renamed one, one with adapters or a draft model on its own")
		}
		opts.Speculative = draft
		if mf.ctx < 1<<30 {
			opts.Context = mf.ctx
		}
		var sources []serve.ModelSource
		for _, p := range paths {
			sources = append(sources, serve.ModelSource{ID: filepath.Base(strings.TrimRight(p, "/")), Bytes: load.PathBytes(p),
				Open: func() (*aotlm.Model, error) { return mf.openPath(p, nil, compile.Options{}) }})
		}
		return serve.NewMulti(sources, opts, mo)
	}
	m, err := mf.open(log, log, compile.Options{})
	if err != nil {
		return nil, err
	}
	if name == "" {
		name = filepath.Base(strings.TrimRight(mf.path, "/")) // the name the user gave, not the compile cache's file
	}
	opts.Context, opts.ModelID = min(mf.ctx, m.Info().Context), name
	p, err := openPrompter(mf.path, mmproj, m, mf.threads, mf.visionLlamaCpp)
	if p != nil {
		opts.Images = p.ServeImages()
	}
	if err == nil {
		_, err = load.AddAdapters(m, mf.loras, mf.loraStorage())
	}
	var dm *aotlm.Model
	switch draft {
	case "", serve.SpecLookup, serve.SpecMTP:
		opts.Speculative = draft
	default:
		if err == nil {
			_, dm, err = load.Strategy(m, load.StrategyOptions{Draft: draft, Threads: mf.threads, Ctx: opts.Context})
			opts.Speculative, opts.Draft = serve.SpecDraft, dm
		}
	}
	var srv *serve.Server
	if err == nil {
		srv, err = serve.New(m, opts)
	}
	if err != nil {
		m.Close()
		dm.Close()
		return nil, err
	}
	return modelServer{srv, m, dm}, nil
}

// modelServer closes its model (and draft model) with the server.
type modelServer struct {
	*serve.Server
	m, draft *aotlm.Model
}

func (s modelServer) Close() {
	s.Server.Close()
	s.m.Close()
	s.draft.Close()
}
