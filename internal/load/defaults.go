package load

import (
	"errors"

	"github.com/aotlm/aotlm/internal/compile"
	"github.com/aotlm/aotlm/internal/limits"
)

// The compile defaults of a model compiled into the cache: what run,
// chat, serve and bench compile with unless told otherwise, so that they
// share one cached artifact.
const (
	// ARLen is the prefill pass length (the AR-N plan).
	ARLen = 32
	// Ctx is the context asked for, clamped to the model's.
	Ctx = 4096
	// KV is the KV cache storage.
	KV = "f32"
)

// Size is a byte count flag value (256M, 1G).
type Size = limits.Size

// StateBudget is the default of each session's state snapshot budget
// (engine.DefaultStateBudget), as the flag value that sets it.
const StateBudget = limits.Size(128 << 20)

// ContextTooLarge reports whether err is a compile or open refused because
// the KV cache of the context asked for does not fit the memory the
// machine has: a smaller context would do.
func ContextTooLarge(err error) bool {
	var ae *limits.AllocError
	return errors.As(err, &ae)
}

// CompileDefaults returns the cache's compile options: ARLen, Ctx
// (clamped to the model's trained context) and KV.
func CompileDefaults() compile.Options {
	return compile.Options{ARLens: []int{ARLen}, Ctx: Ctx, ClampCtx: true, KV: KV}
}
