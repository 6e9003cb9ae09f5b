package main

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/aotlm/aotlm/internal/load"
)

func newTemplateCmd() *cobra.Command {
	var (
		path, messages, date string
		noGenPrompt, asJSON  bool
		vars                 map[string]string
	)
	cmd := &cobra.Command{
		Use:   "template -m MODEL --messages MESSAGES.json",
		Short: "Render a model's chat template for a list of messages",
		Long: `Render the model's chat template (Jinja, from tokenizer_config.json,
chat_template.jinja, or a GGUF file's tokenizer.chat_template) for the
messages in a JSON file: [{"role": "user", "content": "Hi"}, ...]; an
assistant message may hold "reasoning_content" and OpenAI's "tool_calls".
The rendered prompt is printed as is; the assistant's header is appended
unless --no-generation-prompt.`,
		Example: `  aotlm template -m Qwen3-0.6B/ --messages chat.json
  aotlm template -m tokenizer_config.json --messages chat.json --var enable_thinking=false`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if path == "" || messages == "" {
				return fmt.Errorf("pass -m <model or tokenizer_config.json> and --messages <file.json>")
			}
			tpl, err := load.OpenChatTemplate(path)
			if err != nil {
				return err
			}
			msgs, err := load.ChatMessages(messages)
			if err != nil {
				return err
			}
			opts := load.TemplateOptions{GenerationPrompt: !noGenPrompt, Vars: templateVars(vars)}
			if date != "" {
				if opts.Now, err = time.Parse("2006-01-02", date); err != nil {
					return fmt.Errorf("--date %q: want YYYY-MM-DD", date)
				}
			}
			out, err := tpl.Render(msgs, opts)
			if err != nil {
				return err
			}
			if asJSON {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(map[string]string{"prompt": out})
			}
			_, err = fmt.Fprint(cmd.OutOrStdout(), out)
			return err
		},
	}
	f := cmd.Flags()
	f.StringVarP(&path, "model", "m", "", "model folder or file, tokenizer_config.json, or a .jinja template")
	f.StringVar(&messages, "messages", "", "JSON file with the messages")
	f.BoolVar(&noGenPrompt, "no-generation-prompt", false, "do not open the assistant's turn")
	f.StringVar(&date, "date", "", "the date templates print (YYYY-MM-DD; default today)")
	f.StringToStringVar(&vars, "var", nil, "extra template variables, e.g. enable_thinking=false")
	f.BoolVar(&asJSON, "json", false, `print {"prompt": ...}`)
	return cmd
}

// templateVars turns --var values into template values: true/false become
// booleans, everything else stays a string.
func templateVars(v map[string]string) map[string]any {
	out := map[string]any{}
	for k, s := range v {
		switch s {
		case "true":
			out[k] = true
		case "false":
			out[k] = false
		default:
			out[k] = s
		}
	}
	return out
}
