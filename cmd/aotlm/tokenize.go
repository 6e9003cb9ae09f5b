package main

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/aotlm/aotlm/internal/load"
)

func newTokenizeCmd() *cobra.Command {
	var (
		path                        string
		bos, noParseSpecial, asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "tokenize -m MODEL_OR_TOKENIZER [flags] -- TEXT",
		Short: "Print the token ids of a text",
		Long: `Print the token ids of a text.

-m takes a compiled artifact, a tokenizer file (tokenizer.json, SentencePiece .model, llama2.c
tokenizer.bin, tiktoken tokenizer.model), a folder holding tokenizer files,
or a model (GGUF with an embedded vocabulary, Hugging Face folder).
Special tokens written in the text (such as <|im_start|>) are recognized
unless --no-parse-special is given. No BOS is added unless --bos.`,
		Example: `  aotlm tokenize -m stories260K.gguf --json -- "Once upon a time"`,
		Args:    cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if path == "" {
				return fmt.Errorf("no tokenizer: pass -m <tokenizer or model>")
			}
			ids, tokens, err := load.Tokenize(path, strings.Join(args, " "), bos, !noParseSpecial)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if asJSON {
				if ids == nil {
					ids, tokens = []int{}, []string{}
				}
				return json.NewEncoder(out).Encode(map[string]any{"ids": ids, "tokens": tokens})
			}
			for i, id := range ids {
				fmt.Fprintf(out, "%6d -> %q\n", id, tokens[i])
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVarP(&path, "model", "m", "", "tokenizer file or folder, or a model (required)")
	f.BoolVar(&bos, "bos", false, "add the beginning-of-sequence token")
	f.BoolVar(&noParseSpecial, "no-parse-special", false, "read special tokens in the text as plain text")
	f.BoolVar(&asJSON, "json", false, "print one JSON object {ids, tokens}")
	return cmd
}
