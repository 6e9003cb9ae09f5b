// Package aotlm is the runtime of compiled artifacts: Open maps an
// artifact (.aot, from `aotlm compile`) and gives its engine together with
// everything the manifest stores (tokenizer, chat template, generation
// defaults, stop ids); a Model makes Sessions, which generate text with
// streaming, stop ids and stop strings, context cancellation, and reuse
// of their KV cache across calls (a call whose prompt extends what the
// session already holds prefills only the new tokens). Sessions of one
// model that generate at the same time, each in its own goroutine, share
// their decode passes (one row each, the weights read once per step).
// Chat keeps a conversation on one session.
//
// It opens artifacts only and links no compiler. Other backends (the
// graph interpreter behind `aotlm run --no-compile`) plug in through
// NewModel and the Sequence interface.
package aotlm

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/aotlm/aotlm/internal/chat"
	"github.com/aotlm/aotlm/internal/engine"
	"github.com/aotlm/aotlm/internal/plan"
	"github.com/aotlm/aotlm/internal/tokenizer"
)

// Options configures Open.
type Options struct {
	// Threads is the size of the model's worker pool, shared by its
	// sessions (0: one per CPU).
	Threads int
	// Mode is the prefill strategy: "hybrid" (AR-N passes, the default)
	// or "kv" (one token at a time).
	Mode string
	// Context is the cache positions of each session (0: the artifact's
	// compiled context); a smaller value takes less memory, a larger one
	// extends the context without compiling again, up to the model's
	// trained context (Info.MaxContext; more is refused).
	Context int
	// IDsOnly skips the stored tokenizer: requests then give ids and get
	// ids (for benchmarks and callers with a tokenizer of their own).
	IDsOnly bool
	// HugePages makes sure the artifact sits in huge pages (Linux): where
	// the page cache does not hold it in 2 MiB folios already (a model
	// compiled on this machine usually is), it is read into memory advised
	// for transparent huge pages instead of mapped. Decode streams the
	// weights with fewer TLB misses, at the cost of a load that reads the
	// whole file and memory the kernel cannot drop as it drops mapped pages.
	HugePages bool
	// StateBudget bounds the bytes of the state snapshots each session of
	// a model with recurrent state keeps, to rewind to recent pass
	// boundaries (0: 128 MiB; at least 3 and at most 17 snapshots are
	// kept whatever it says). Models without recurrent state ignore it.
	StateBudget int64
}

// Info describes a model.
type Info struct {
	Name         string // the artifact's file name or the backend's label
	Architecture string
	Vocab        int
	Context      int // positions of a session's cache
	// MaxContext is the most positions Options.Context may ask for: the
	// model's trained context (times its rope scaling factor where its
	// config says so), or Context for an artifact that records none.
	MaxContext int
	// KVCache is the cache storage: "f32", "f16", "u8", "q4" or "q4v".
	KVCache string
	// ARLens are the pass lengths of the artifact's plans.
	ARLens []int
	// Passport is the artifact's quality record as JSON (recipe, text,
	// and the perplexity, KL divergence and top-1 agreement of each
	// phase measured; docs/quantization.md), nil when it has none.
	Passport json.RawMessage
}

// Sequence is one sequence on a backend: what a Session drives. The
// engine's sessions implement it, and so does the graph interpreter's.
type Sequence interface {
	// PrefillContext feeds ids, commits them, and returns the logits after
	// the last one; it checks ctx between passes.
	PrefillContext(ctx context.Context, ids []int) ([]float32, error)
	// Decode feeds one id, commits it, and returns the logits after it.
	Decode(id int) ([]float32, error)
	// Rewind drops committed positions from pos on; a backend that cannot
	// (recurrent state) refuses all but 0.
	Rewind(pos int) error
	// Pos is the number of committed positions; Context the capacity.
	Pos() int
	Context() int
	// Close releases the sequence.
	Close()
}

// Config builds a Model over a backend other than an artifact.
type Config struct {
	Info Info
	// NewSequence makes a sequence of at most ctx positions (0: the
	// backend's full context).
	NewSequence func(ctx int) (Sequence, error)
	Tokenizer   Tokenizer // nil: text in and out is refused
	// ChatTemplate is the Jinja source of the chat template ("" if none).
	ChatTemplate string
	BOS          int   // -1 if none
	EOS          []int // ids that end generation
	// Generation holds the model's sampling defaults.
	Generation GenerationDefaults
	// Close releases the backend when the model is closed.
	Close func() error
}

// Model is an opened model: it makes sessions and holds the tokenizer,
// chat template and generation defaults. It is safe for concurrent use.
type Model struct {
	cfg      Config
	tok      tokenizer.Tokenizer // cfg.Tokenizer as the module's packages see it
	eng      *engine.Engine      // nil for other backends
	mode     engine.Mode
	batch    *batcher // nil: sessions decode one pass each
	template *chat.Template
	specials chat.Specials
	stop     []int
}

// ErrNoTokenizer is returned for text when the model has no tokenizer.
var ErrNoTokenizer = errors.New("the model has no tokenizer")

// ErrNoChatTemplate is returned by NewChat for a model without one.
var ErrNoChatTemplate = errors.New("the model has no chat template")

// Open maps the compiled artifact at path.
func Open(path string, opts Options) (*Model, error) {
	mode := engine.ModeHybrid
	switch opts.Mode {
	case "", "hybrid":
	case "kv":
		mode = engine.ModeKV
	default:
		return nil, fmt.Errorf("mode %q: want hybrid or kv", opts.Mode)
	}
	if opts.StateBudget < 0 {
		return nil, fmt.Errorf("state budget %d: want 0 (the default) or a number of bytes", opts.StateBudget)
	}
	if opts.Context < 0 {
		return nil, fmt.Errorf("%s: a context of %d positions: want a number of positions, or 0 for the artifact's", path, opts.Context)
	}
	eng, err := engine.OpenWith(path, engine.Options{Threads: opts.Threads, HugePages: opts.HugePages, Context: opts.Context})
	if err != nil {
		return nil, err
	}
	man := eng.Manifest()
	ctx := cmp.Or(opts.Context, man.Ctx)
	gen, err := generationDefaults(man.Generation)
	if err != nil {
		eng.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	kv := "f32"
	if man.KVCache != nil {
		kv = man.KVCache.DType
	}
	cfg := Config{
		Info: Info{Name: baseName(path), Architecture: man.Architecture, Vocab: man.Vocab, Context: ctx, MaxContext: eng.MaxContext(),
			KVCache: kv, ARLens: eng.ARLens(), Passport: man.Passport},
		ChatTemplate: man.ChatTemplate, BOS: man.BOS, EOS: man.EOS, Generation: gen,
		Close: eng.Close,
	}
	if man.Tokenizer != nil && !opts.IDsOnly {
		tok, err := storedTokenizer(eng, man)
		if err != nil {
			eng.Close()
			return nil, fmt.Errorf("%s: tokenizer: %w", path, err)
		}
		cfg.Tokenizer = wrapTokenizer(tok)
	}
	m, err := newModel(cfg)
	if err != nil {
		eng.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	m.eng, m.mode, m.batch = eng, mode, newBatcher(eng)
	m.cfg.NewSequence = func(n int) (Sequence, error) {
		if n == 0 {
			n = ctx
		}
		return eng.NewSession(engine.SessionOptions{Mode: mode, Threads: eng.Threads(), Context: min(n, ctx), StateBudget: opts.StateBudget})
	}
	return m, nil
}

// NewModel makes a model over another backend.
func NewModel(cfg Config) (*Model, error) {
	if cfg.NewSequence == nil {
		return nil, errors.New("aotlm: a model needs NewSequence")
	}
	return newModel(cfg)
}

func newModel(cfg Config) (*Model, error) {
	m := &Model{cfg: cfg, tok: internalTokenizer(cfg.Tokenizer)}
	if cfg.ChatTemplate != "" {
		t, err := chat.ParseNamed(cfg.Info.Name, cfg.ChatTemplate)
		if err != nil {
			return nil, fmt.Errorf("chat template: %w", err)
		}
		m.template = t
	}
	tok := m.tok
	if tok != nil {
		if cfg.BOS >= 0 {
			m.specials.BOS = tok.Token(cfg.BOS)
		}
		if len(cfg.EOS) > 0 {
			m.specials.EOS = tok.Token(cfg.EOS[0])
		} else if tok.EOS() >= 0 {
			m.specials.EOS = tok.Token(tok.EOS())
		}
	}
	m.stop = append([]int(nil), cfg.EOS...)
	if tok != nil && tok.EOS() >= 0 {
		m.stop = append(m.stop, tok.EOS())
	}
	return m, nil
}

// storedTokenizer rebuilds the tokenizer the compiler stored.
func storedTokenizer(eng *engine.Engine, man plan.Manifest) (tokenizer.Tokenizer, error) {
	data, err := eng.Blob(man.Tokenizer.Blob)
	if err != nil {
		return nil, err
	}
	return (&tokenizer.Stored{Kind: man.Tokenizer.Kind, Data: data}).Build(man.Vocab)
}

// Info describes the model.
func (m *Model) Info() Info { return m.cfg.Info }

// Tokenizer returns the model's tokenizer, nil if it has none.
func (m *Model) Tokenizer() Tokenizer { return m.cfg.Tokenizer }

// SetTokenizer replaces the model's tokenizer (for artifacts compiled
// without one); it must be called before sessions are made.
func (m *Model) SetTokenizer(tok Tokenizer) {
	m.cfg.Tokenizer = tok
	if m2, err := newModel(m.cfg); err == nil {
		m.tok, m.template, m.specials, m.stop = m2.tok, m2.template, m2.specials, m2.stop
	}
}

// HasChatTemplate reports whether the model has a chat template.
func (m *Model) HasChatTemplate() bool { return m.template != nil }

// ChatTemplateSource returns the Jinja source of the model's chat
// template ("" if it has none).
func (m *Model) ChatTemplateSource() string {
	if m.template == nil {
		return ""
	}
	return m.template.Source()
}

// SetChatTemplate replaces the model's chat template with Jinja source.
func (m *Model) SetChatTemplate(name, src string) error {
	t, err := chat.ParseNamed(name, src)
	if err != nil {
		return fmt.Errorf("chat template %s: %w", name, err)
	}
	m.template = t
	return nil
}

// GenerationDefaults returns the model's own sampling defaults (from its
// generation_config.json, kept in the artifact).
func (m *Model) GenerationDefaults() GenerationDefaults { return m.cfg.Generation }

// BOS returns the id a prompt starts with, or -1.
func (m *Model) BOS() int {
	if m.cfg.BOS >= 0 {
		return m.cfg.BOS
	}
	if m.tok != nil {
		return m.tok.BOS()
	}
	return -1
}

// StopIDs returns the ids that end generation.
func (m *Model) StopIDs() []int { return append([]int(nil), m.stop...) }

// Close releases the model; its sessions must not be used afterwards.
// Close on a nil Model does nothing.
func (m *Model) Close() error {
	if m != nil && m.cfg.Close != nil {
		return m.cfg.Close()
	}
	return nil
}

func baseName(path string) string {
	for i := len(path) - 1; i >= 0; i-- {
		if path[i] == '/' || path[i] == '\\' {
			return path[i+1:]
		}
	}
	return path
}
