package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/aotlm/aotlm"
	"github.com/aotlm/aotlm/internal/compile"
	"github.com/aotlm/aotlm/internal/load"
	"github.com/aotlm/aotlm/internal/progress"
	"github.com/aotlm/aotlm/internal/visionload"
)

func newChatCmd() *cobra.Command {
	var (
		modelPath, tokPath, system, templatePath, mode, kv string
		mmproj                                             string
		n, threads, ctx, arLen                             int
		hugePages                                          bool
		p                                                  aotlm.Sampling
		seed                                               int64
		asJSON, noCompile, llamaCpp                        bool
		stops                                              []string
	)
	cmd := &cobra.Command{
		Use:   "chat [-m MODEL]",
		Short: "Chat with a model, keeping its cache across turns",
		Long: `Chat with a model: each line read from standard input is a user turn, and
the reply streams to standard output. The conversation is rendered with the
model's chat template (or --chat-template) every turn, and only the tokens
after what the cache already holds are prefilled, so a turn's time to first
token does not grow with the history.

Commands: /reset forgets the conversation, /system TEXT sets the system
prompt, /image FILE attaches an image (JPEG, PNG, GIF, WebP) to the next user
turn of a vision-language model (a SmolVLM, Qwen2-VL, Qwen2.5-VL or InternVL
folder or artifact, or a text GGUF with --mmproj): it goes where that turn writes
<image>, else before its text, and
stays in the conversation, so later turns reuse the cache past it. /exit (or
end of input) quits. When the context fills, the oldest
turns are left out (the system prompt is kept) and a note says so.
MODEL is taken as by "aotlm run" (a checkpoint compiles into the cache).`,
		Example: `  aotlm chat -m qwen3.aot --system "Answer briefly."
  printf 'Hi\nTell me a story\n' | aotlm chat -m model.aot --temp 0 --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var err error
			if modelPath, err = resolveModel(modelPath, cmd.ErrOrStderr()); err != nil {
				return err
			}
			if modelPath, err = resolveModelArg(modelPath, cmd.ErrOrStderr()); err != nil {
				return err
			}
			if seed >= 0 {
				p.Seed = uint64(seed)
			} else {
				p.Seed = randomSeed()
			}
			m, err := openModel(modelPath, openOptions{Tokenizer: tokPath, Threads: threads, Mode: mode, HugePages: hugePages, NoCompile: noCompile,
				Compile: compile.Options{ARLens: []int{arLen}, Ctx: ctx, ClampCtx: true, KV: kv, VisionLlamaCpp: llamaCpp}, Log: cmd.ErrOrStderr()})
			if err != nil {
				return err
			}
			defer m.Close()
			if templatePath != "" {
				if err := load.SetChatTemplate(m, templatePath); err != nil {
					return err
				}
			}
			p = applyGenerationDefaults(cmd, p, m.GenerationDefaults())
			opts := aotlm.ChatOptions{System: system, Context: min(ctx, m.Info().Context)}
			var images *visionload.ChatImages
			if p, err := openPrompter(modelPath, mmproj, m, threads, llamaCpp); err != nil {
				return err
			} else if p != nil {
				images = p.Chat()
				opts.Encode = images.Encode
			}
			c, err := m.NewChat(opts)
			if err != nil {
				return fmt.Errorf("%s: %w (pass --chat-template <file>)", modelPath, err)
			}
			defer c.Close()
			return chatLoop(cmd, c, aotlm.Request{MaxTokens: n, Sampling: p, Stop: stops}, asJSON, images)
		},
	}
	f := cmd.Flags()
	f.StringVarP(&modelPath, "model", "m", "", "model file or folder (default: the built-in demo model, which needs --chat-template)")
	f.StringVar(&tokPath, "tokenizer", "", "tokenizer file or folder, for checkpoints without one")
	f.StringVar(&system, "system", "", "system prompt")
	f.StringVar(&templatePath, "chat-template", "", "a chat template (.jinja, tokenizer_config.json or GGUF) replacing the model's")
	f.StringVar(&mode, "mode", "hybrid", "prefill: hybrid (AR-N passes) or kv (one token at a time)")
	f.BoolVar(&noCompile, "no-compile", false, "run an uncompiled model through the graph interpreter")
	f.IntVar(&arLen, "ar-len", load.ARLen, "prompt pass length when compiling")
	f.StringVar(&kv, "kv", load.KV, "KV cache storage when compiling: f32, f16 or u8")
	f.IntVarP(&n, "n-predict", "n", 512, "most tokens of one reply (-1: until the end of turn or a full context)")
	f.IntVarP(&threads, "threads", "t", runtime.GOMAXPROCS(0), "threads")
	f.BoolVar(&hugePages, "hugepages", false, hugePagesUsage)
	f.IntVarP(&ctx, "ctx", "c", load.Ctx, "context length (capped at the model's)")
	addSamplingFlags(f, &p, &seed)
	f.StringArrayVar(&stops, "stop", nil, "a string that ends a reply (repeatable)")
	f.BoolVar(&asJSON, "json", false, "print one JSON object per turn instead of streaming text")
	f.StringVar(&mmproj, "mmproj", "", "llama.cpp's vision GGUF (mmproj) for a text GGUF given with -m, for /image")
	f.BoolVar(&llamaCpp, "vision-llama-cpp", false, visionLlamaCppHelp)
	return cmd
}

// chatTurn is what `chat --json` prints for each turn.
type chatTurn struct {
	Turn        int     `json:"turn"`
	PromptIDs   []int   `json:"prompt_ids"`
	IDs         []int   `json:"ids"`
	Text        string  `json:"text"`
	StopReason  string  `json:"stop_reason"`
	Reused      int     `json:"reused"`
	Dropped     int     `json:"dropped"`
	TTFTMs      float64 `json:"ttft_ms"`
	PrefillTokS float64 `json:"prefill_tok_s"`
	DecodeTokS  float64 `json:"decode_tok_s"`
}

// chatLoop reads turns and commands from the command's input until its
// end or /exit; images is nil for a model without vision.
func chatLoop(cmd *cobra.Command, c *aotlm.Chat, req aotlm.Request, asJSON bool, images *visionload.ChatImages) error {
	in := cmd.InOrStdin()
	out, errw := cmd.OutOrStdout(), cmd.ErrOrStderr()
	interactive := progress.IsTerminal(out) && isTerminalReader(in)
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64*1024), maxChatLine)
	turn := 0
	for {
		if interactive {
			fmt.Fprint(out, "> ")
		}
		if !sc.Scan() {
			if err := sc.Err(); err != nil {
				return fmt.Errorf("reading input: %w", err)
			}
			return nil
		}
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "":
			continue
		case line == "/exit" || line == "/quit":
			return nil
		case line == "/reset":
			if err := c.Reset(); err != nil {
				return err
			}
			if images != nil {
				images.Reset()
			}
			fmt.Fprintln(errw, "(conversation reset)")
			continue
		case strings.HasPrefix(line, "/system"):
			c.SetSystem(strings.TrimSpace(strings.TrimPrefix(line, "/system")))
			fmt.Fprintln(errw, "(system prompt set)")
			continue
		case line == "/help":
			fmt.Fprintln(errw, "/reset, /system TEXT, /image FILE, /exit")
			continue
		case line == "/image" || strings.HasPrefix(line, "/image "):
			attachImage(errw, images, strings.TrimSpace(strings.TrimPrefix(line, "/image")))
			continue
		}
		if images != nil {
			msg, err := images.Message(line)
			if err != nil {
				fmt.Fprintf(errw, "(%v: the turn was not sent)\n", err)
				continue
			}
			line = msg
			req.Embeds = images.Embeds()
		}
		turn++
		var onToken func(aotlm.Token) error
		if !asJSON {
			onToken = func(t aotlm.Token) error {
				_, err := io.WriteString(out, t.Text)
				return err
			}
		}
		res, err := c.Send(cmd.Context(), line, req, onToken)
		if err != nil {
			return err
		}
		if res.Dropped > 0 {
			fmt.Fprintf(errw, "(the context is full: left out the %d oldest messages)\n", res.Dropped)
		}
		if asJSON {
			if err := json.NewEncoder(out).Encode(chatTurn{Turn: turn, PromptIDs: res.PromptIDs, IDs: res.IDs, Text: res.Text,
				StopReason: res.StopReason, Reused: res.Reused, Dropped: res.Dropped,
				TTFTMs: float64(res.TTFT.Microseconds()) / 1000, PrefillTokS: res.PrefillTokS(), DecodeTokS: res.DecodeTokS()}); err != nil {
				return err
			}
			continue
		}
		fmt.Fprintln(out)
		fmt.Fprintf(errw, "(%d prompt tokens, %d reused from the cache; first token after %.1f ms; %d tokens at %.1f tok/s; %s)\n",
			len(res.PromptIDs), res.Reused, float64(res.TTFT.Microseconds())/1000, len(res.IDs), res.DecodeTokS(), res.StopReason)
	}
}

// maxChatLine bounds one input line.
const maxChatLine = 1 << 20

// isTerminalReader reports whether r is a terminal.
func isTerminalReader(r io.Reader) bool {
	f, ok := r.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// randomSeed returns a seed from the clock.
func randomSeed() uint64 { return uint64(time.Now().UnixNano()) }
