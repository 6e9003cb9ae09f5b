package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/aotlm/aotlm"
	"github.com/aotlm/aotlm/internal/compile"
	"github.com/aotlm/aotlm/internal/load"
	"github.com/aotlm/aotlm/internal/progress"
	"github.com/aotlm/aotlm/internal/visionload"
)

func newChatCmd() *cobra.Command {
	var (
		mf             *modelFlags
		system, mmproj string
		n              int
		p              aotlm.Sampling
		seed           int64
		asJSON         bool
		stops          []string
		shift          *shiftFlags
	)
	cmd := &cobra.Command{
		Use:   "chat [-m MODEL]",
		Short: "Chat with a model, keeping its cache across turns",
		Long:  help("chat"),
		Example: `  aotlm chat -m qwen3.aot --system "Answer briefly."
  printf 'Hi\nTell me a story\n' | aotlm chat -m model.aot --temp 0 --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			p.Seed = seedOf(seed)
			m, err := mf.open(cmd.ErrOrStderr(), cmd.ErrOrStderr(), compile.Options{})
			if err != nil {
				return err
			}
			defer m.Close()
			p = applyGenerationDefaults(cmd, p, m.GenerationDefaults())
			opts := aotlm.ChatOptions{System: system, Context: min(mf.ctx, m.Info().Context)}
			var images *visionload.ChatImages
			if p, err := openPrompter(mf.path, mmproj, m, mf.threads, mf.visionLlamaCpp); err != nil {
				return err
			} else if p != nil {
				images = p.Chat()
				opts.Encode = images.Encode
			}
			c, err := m.NewChat(opts)
			if err != nil {
				return fmt.Errorf("%s: %w (pass --chat-template <file>)", mf.path, err)
			}
			defer c.Close()
			if err := load.ChooseAdapter(c.Session(), mf.loras, mf.loraStorage(), true); err != nil {
				return err
			}
			cs, err := shift.request()
			if err != nil {
				return err
			}
			return chatLoop(cmd, c, aotlm.Request{MaxTokens: n, Sampling: p, Stop: stops, ContextShift: cs}, asJSON, images)
		},
	}
	f := cmd.Flags()
	mf = addModelFlags(f, "model file, folder or Hub repository org/name[:QUANT] (default: the built-in demo model, which needs --chat-template)", false)
	f.StringVar(&system, "system", "", "system prompt")
	f.IntVarP(&n, "n-predict", "n", 512, "most tokens of one reply (-1: until the end of turn or a full context)")
	addSamplingFlags(f, &p, &seed)
	f.StringArrayVar(&stops, "stop", nil, "a string that ends a reply (repeatable)")
	f.BoolVar(&asJSON, "json", false, "print one JSON object per turn instead of streaming text")
	shift = addShiftFlags(f)
	f.StringVar(&mmproj, "mmproj", "", "llama.cpp's vision GGUF (mmproj) for a text GGUF given with -m, for /image")
	return cmd
}

// chatTurn is what `chat --json` prints for each turn.
type chatTurn struct {
	Turn int `json:"turn"`
	runReport
	Reused  int `json:"reused"`
	Dropped int `json:"dropped"`
}

// chatLoop reads turns and commands from the command's input until its
// end or /exit; images is nil for a model without vision.
func chatLoop(cmd *cobra.Command, c *aotlm.Chat, req aotlm.Request, asJSON bool, images *visionload.ChatImages) error {
	in := cmd.InOrStdin()
	out, errw := cmd.OutOrStdout(), cmd.ErrOrStderr()
	interactive := progress.IsTerminal(out) && progress.IsTerminal(in)
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
			fmt.Fprintln(errw, "/reset, /system TEXT, /image FILE, /adapter [NAME[:SCALE]], /exit")
			continue
		case line == "/adapter" || strings.HasPrefix(line, "/adapter "):
			arg := strings.TrimSpace(strings.TrimPrefix(line, "/adapter"))
			if err := load.SwitchAdapter(c.Session(), arg); err != nil {
				fmt.Fprintf(errw, "(%v)\n", err)
			} else {
				fmt.Fprintf(errw, "(adapter %q: the next turn prefills the conversation again)\n", arg)
			}
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
			if err := json.NewEncoder(out).Encode(chatTurn{Turn: turn, runReport: reportOf(res.Result, req.Sampling.Seed), Reused: res.Reused, Dropped: res.Dropped}); err != nil {
				return err
			}
			continue
		}
		fmt.Fprintln(out)
		shifted := ""
		if res.Shifts > 0 {
			shifted = fmt.Sprintf("; context shifts %d, dropping %d tokens", res.Shifts, res.Shifted)
		}
		fmt.Fprintf(errw, "(%d prompt tokens, %d reused from the cache; first token after %.1f ms; %d tokens at %.1f tok/s; %s%s)\n",
			len(res.PromptIDs), res.Reused, float64(res.TTFT.Microseconds())/1000, len(res.IDs), res.DecodeTokS(), res.StopReason, shifted)
	}
}

// maxChatLine bounds one input line.
const maxChatLine = 1 << 20
