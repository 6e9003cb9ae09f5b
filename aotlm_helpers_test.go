package aotlm_test

import (
	"github.com/aotlm/aotlm/internal/chat"
	"github.com/aotlm/aotlm/internal/tokenizer"
)

var (
	tokOpts        = tokenizer.EncodeOptions{ParseSpecial: true}
	chatRenderOpts = chat.Options{AddGenerationPrompt: true}
)
