package load

import "github.com/aotlm/aotlm/internal/compile"

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

// CompileDefaults returns the cache's compile options: ARLen, Ctx
// (clamped to the model's trained context) and KV.
func CompileDefaults() compile.Options {
	return compile.Options{ARLens: []int{ARLen}, Ctx: Ctx, ClampCtx: true, KV: KV}
}
