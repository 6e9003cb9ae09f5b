// Package modelparts gives the module's own commands and server the parts
// of an aotlm.Model that its public API keeps to itself: the engine, the
// tokenizer and the parsed chat template. The root package fills in the
// hooks when it is initialised, so they are set before any importer runs.
package modelparts

import (
	"github.com/aotlm/aotlm/internal/chat"
	"github.com/aotlm/aotlm/internal/engine"
	"github.com/aotlm/aotlm/internal/tokenizer"
)

// Parts are what a model holds behind its public API.
type Parts struct {
	// Engine is the compiled artifact's engine; nil for other backends.
	Engine *engine.Engine
	// Tokenizer is nil when the model has none.
	Tokenizer tokenizer.Tokenizer
	// Template is nil when the model has no chat template.
	Template *chat.Template
	Specials chat.Specials
}

// Hooks the root package sets; the any values are *aotlm.Model and
// aotlm.Tokenizer, which this package cannot name without an import cycle.
var (
	of          func(model any) Parts
	wrapToken   func(tokenizer.Tokenizer) any
	unwrapToken func(any) tokenizer.Tokenizer
)

// Register sets the hooks; the root package calls it once, in init.
func Register(partsOf func(model any) Parts, wrap func(tokenizer.Tokenizer) any, unwrap func(any) tokenizer.Tokenizer) {
	of, wrapToken, unwrapToken = partsOf, wrap, unwrap
}

// Of returns the parts of model, an *aotlm.Model.
func Of(model any) Parts { return of(model) }

// Engine returns the engine of model, an *aotlm.Model (nil for a backend
// other than an artifact).
func Engine(model any) *engine.Engine { return of(model).Engine }

// Tokenizer returns the tokenizer of model, an *aotlm.Model (nil if none).
func Tokenizer(model any) tokenizer.Tokenizer { return of(model).Tokenizer }

// PublicTokenizer wraps tok as an aotlm.Tokenizer (nil for nil); assert
// the result's type.
func PublicTokenizer(tok tokenizer.Tokenizer) any { return wrapToken(tok) }

// InternalTokenizer returns the tokenizer behind an aotlm.Tokenizer (nil
// for nil).
func InternalTokenizer(tok any) tokenizer.Tokenizer { return unwrapToken(tok) }
