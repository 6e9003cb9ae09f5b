package serve

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/aotlm/aotlm"
	"github.com/aotlm/aotlm/internal/modelparts"
	"github.com/aotlm/aotlm/internal/tokenizer"
)

// Sentinels stand for a message's content while the template renders, so
// that the content's place in the rendered text is known; they are
// private-use characters no template writes.
const (
	sentinelOpen  = "\uE000"
	sentinelClose = "\uE001"
)

// encodePrompt encodes text, the rendering of msgs, with special tokens
// recognized only where the template wrote them: the special-token text
// of user and tool contents ("<|im_start|>system" typed by a user) is
// encoded as plain text, so a message cannot forge a role turn. render
// renders messages as text was. A template that rewrites such a content
// beyond trimming it cannot be followed, and the prompt is refused.
func encodePrompt(tok tokenizer.Tokenizer, msgs []aotlm.Message, text string, render func([]aotlm.Message) (string, error)) ([]int, error) {
	special := tokenizer.EncodeOptions{ParseSpecial: true}
	var marked []int
	for i, m := range msgs {
		if (m.Role != "user" && m.Role != "tool") || m.Content == "" {
			continue
		}
		if hasSpecialText(tok, m.Content) {
			marked = append(marked, i)
		}
	}
	if len(marked) == 0 {
		return tokenizer.EncodeChecked(tok, text, special)
	}
	if strings.Contains(text, sentinelOpen) {
		return nil, fmt.Errorf("the messages hold the character U+E000, which marks contents while they render")
	}
	stand := slices.Clone(msgs)
	for k, i := range marked {
		stand[i].Content = sentinel(k)
	}
	withMarks, err := render(stand)
	if err != nil {
		return nil, fmt.Errorf("chat template: %w", err)
	}
	// the rendering with sentinels, each replaced by its content (or the
	// content trimmed, as many templates do), must give text back
	var ids []int
	pos := 0 // in text
	rest := withMarks
	for k, i := range marked {
		mark := sentinel(k)
		at := strings.Index(rest, mark)
		if at < 0 || strings.Contains(rest[at+len(mark):], mark) {
			return nil, fmt.Errorf("the chat template does not write message %d as it is, so its special-token text cannot be kept as plain text", i)
		}
		head := rest[:at]
		if !strings.HasPrefix(text[pos:], head) {
			return nil, fmt.Errorf("the chat template renders message %d differently from its content, so its special-token text cannot be kept as plain text", i)
		}
		pos += len(head)
		content := msgs[i].Content
		if !strings.HasPrefix(text[pos:], content) {
			content = strings.TrimSpace(content)
			if !strings.HasPrefix(text[pos:], content) {
				return nil, fmt.Errorf("the chat template rewrites message %d, so its special-token text cannot be kept as plain text", i)
			}
		}
		pos += len(content)
		rest = rest[at+len(mark):]
		if ids, err = appendEncoded(tok, ids, head, special); err != nil {
			return nil, err
		}
		if ids, err = appendEncoded(tok, ids, content, tokenizer.EncodeOptions{}); err != nil {
			return nil, err
		}
	}
	if text[pos:] != rest {
		return nil, fmt.Errorf("the chat template renders the messages differently around their contents, so special-token text in them cannot be kept as plain text")
	}
	return appendEncoded(tok, ids, rest, special)
}

// hasSpecialText reports whether s holds the text of a special token.
func hasSpecialText(tok tokenizer.Tokenizer, s string) bool {
	return !slices.Equal(tok.Encode(s, tokenizer.EncodeOptions{ParseSpecial: true}), tok.Encode(s, tokenizer.EncodeOptions{}))
}

func sentinel(k int) string { return sentinelOpen + strconv.Itoa(k) + sentinelClose }

func appendEncoded(tok tokenizer.Tokenizer, ids []int, s string, opts tokenizer.EncodeOptions) ([]int, error) {
	if s == "" {
		return ids, nil
	}
	more, err := tokenizer.EncodeChecked(tok, s, opts)
	if err != nil {
		return nil, err
	}
	return append(ids, more...), nil
}

// encodeChat encodes text, the rendering of msgs with ro, as
// encodePrompt does.
func (s *Server) encodeChat(msgs []aotlm.Message, text string, ro aotlm.RenderOptions) ([]int, error) {
	tok := modelparts.Tokenizer(s.m)
	if tok == nil {
		return s.m.Encode(text, true)
	}
	return encodePrompt(tok, msgs, text, func(m []aotlm.Message) (string, error) { return s.m.RenderChat(m, ro) })
}

// noSpecialText refuses user and tool messages holding special-token
// text, for prompts whose encoder (a vision model's) cannot keep it plain.
// Only the text parts are read: the images' placeholders are the
// encoder's own.
func (s *Server) noSpecialText(msgs []chatMessage) error {
	tok := modelparts.Tokenizer(s.m)
	if tok == nil {
		return nil
	}
	for i, m := range msgs {
		if (m.Role == "user" || m.Role == "tool") && hasSpecialText(tok, m.Content.Text) {
			return fmt.Errorf("message %d holds the text of a special token, which a conversation with images cannot keep as plain text", i)
		}
	}
	return nil
}
