// Package mobile is the part of the aotlm runtime that gomobile can bind
// for Android and iOS apps: only strings, numbers, errors and callback
// interfaces cross the boundary.
//
//	gomobile bind -target android -o aotlm.aar github.com/aotlm/aotlm/mobile
//
// An app opens a compiled artifact with Open, starts a conversation with
// NewChat, and sends messages with Chat.Send, which streams the reply's
// text to a TokenHandler; Chat.Cancel (from another thread) stops it.
package mobile

import (
	"context"
	"encoding/json"
	"errors"
	"sync"

	"github.com/aotlm/aotlm"
)

// Model is an opened artifact.
type Model struct {
	m *aotlm.Model
}

// Open maps the compiled artifact (.aot) at path; threads is the size of
// the worker pool (0: one per CPU) and context is each chat's cache
// positions (0: the artifact's compiled context; more extends it up to
// the model's trained context, as aotlm.Options.Context does).
func Open(path string, threads, context int) (*Model, error) {
	m, err := aotlm.Open(path, aotlm.Options{Threads: threads, Context: context})
	if err != nil {
		return nil, err
	}
	return &Model{m: m}, nil
}

// InfoJSON describes the model as JSON: name, architecture, vocabulary
// and context size, KV cache storage.
func (m *Model) InfoJSON() string {
	b, _ := json.Marshal(m.m.Info())
	return string(b)
}

// SetChatTemplate replaces the model's chat template (Jinja source).
func (m *Model) SetChatTemplate(src string) error { return m.m.SetChatTemplate("chat_template", src) }

// Close releases the model; close its chats first.
func (m *Model) Close() error { return m.m.Close() }

// TokenHandler receives a reply's text as it is generated. Returning
// false stops the reply.
type TokenHandler interface {
	OnToken(text string) bool
}

// Chat is one conversation that keeps its cache across turns.
type Chat struct {
	c      *aotlm.Chat
	mu     sync.Mutex
	cancel context.CancelFunc
	// Sampling settings for the next replies.
	Temperature float64 // 0: greedy
	TopP        float64 // 0 or 1: off
	TopK        int     // 0: off
	Seed        int64
}

// NewChat starts a conversation with a system prompt ("" for none).
func (m *Model) NewChat(system string) (*Chat, error) {
	c, err := m.m.NewChat(aotlm.ChatOptions{System: system})
	if err != nil {
		return nil, err
	}
	return &Chat{c: c, Temperature: 0.7, TopP: 0.95}, nil
}

// errStopped ends a reply that the handler declined.
var errStopped = errors.New("stopped by the token handler")

// Send adds the user's message and generates the reply (at most
// maxTokens tokens; 0: until the end of the turn), streaming it to h
// (nil: none), and returns the whole reply. Cancel or a false from h
// ends it early, without an error.
func (c *Chat) Send(user string, maxTokens int, h TokenHandler) (string, error) {
	ctx, cancel := context.WithCancel(context.Background())
	c.mu.Lock()
	c.cancel = cancel
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.cancel = nil
		c.mu.Unlock()
		cancel()
	}()
	req := aotlm.Request{MaxTokens: maxTokens, Sampling: aotlm.Sampling{Temperature: float32(c.Temperature),
		TopP: float32(c.TopP), TopK: c.TopK, Seed: uint64(c.Seed)}}
	res, err := c.c.Send(ctx, user, req, func(t aotlm.Token) error {
		if h != nil && t.Text != "" && !h.OnToken(t.Text) {
			return errStopped
		}
		return nil
	})
	if res == nil {
		return "", err
	}
	if errors.Is(err, errStopped) || errors.Is(err, context.Canceled) {
		err = nil
	}
	return res.Text, err
}

// Cancel stops the reply being generated (safe from any thread).
func (c *Chat) Cancel() {
	c.mu.Lock()
	if c.cancel != nil {
		c.cancel()
	}
	c.mu.Unlock()
}

// Reset forgets the conversation.
func (c *Chat) Reset() error { return c.c.Reset() }

// Close releases the chat.
func (c *Chat) Close() { c.c.Close() }
