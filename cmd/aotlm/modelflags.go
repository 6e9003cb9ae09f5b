package main

import (
	"fmt"
	"io"
	"runtime"

	"github.com/spf13/pflag"

	"github.com/aotlm/aotlm"
	"github.com/aotlm/aotlm/internal/compile"
	"github.com/aotlm/aotlm/internal/load"
)

// modelFlags are the flags of the commands that open a model to generate
// with (run, chat, serve): which model, how it compiles into the cache,
// and how it runs.
type modelFlags struct {
	path, tokenizer, mode, kv, template string
	paths                               []string // -m repeated (serve)
	stateBudget                         load.Size
	threads, ctx, arLen                 int
	hugePages, noCompile                bool
	visionLlamaCpp, loraF32, loraQ8     bool
	loras                               []string // --lora [NAME=]PATH[:SCALE]
	flags                               *pflag.FlagSet
}

// addModelFlags registers the flags; modelUsage is -m's help, and
// several lets -m be repeated (into paths).
func addModelFlags(f *pflag.FlagSet, modelUsage string, several bool) *modelFlags {
	m := &modelFlags{flags: f}
	if several {
		f.StringArrayVarP(&m.paths, "model", "m", nil, modelUsage)
	} else {
		f.StringVarP(&m.path, "model", "m", "", modelUsage)
	}
	f.StringVar(&m.tokenizer, "tokenizer", "", "tokenizer file or folder, for checkpoints without one")
	f.StringVar(&m.mode, "mode", "hybrid", "prefill of a compiled artifact: hybrid (AR-N passes) or kv (one token at a time)")
	f.BoolVar(&m.noCompile, "no-compile", false, "run an uncompiled model through the graph interpreter instead of compiling it into the cache")
	f.IntVar(&m.arLen, "ar-len", load.ARLen, "prompt pass length when compiling")
	f.StringVar(&m.kv, "kv", load.KV, "KV cache storage when compiling: f32, f16, u8, q4 or q4v (4-bit, rotated per head; q4v: values only)")
	f.IntVarP(&m.threads, "threads", "t", runtime.GOMAXPROCS(0), "threads")
	f.BoolVar(&m.hugePages, "hugepages", false, hugePagesUsage)
	f.IntVarP(&m.ctx, "ctx", "c", load.Ctx, "context length: unset, capped at the model's; set, up to the model's trained context (an artifact compiled for less extends without compiling again), more is refused")
	f.StringVar(&m.template, "chat-template", "", "a chat template (.jinja, tokenizer_config.json or GGUF) replacing the model's")
	f.BoolVar(&m.visionLlamaCpp, "vision-llama-cpp", false, visionLlamaCppHelp)
	f.StringArrayVar(&m.loras, "lora", nil, "[NAME=]PATH[:SCALE]: a LoRA adapter (PEFT folder or GGUF adapter) applied at run time beside the base weights (serve: repeatable)")
	f.BoolVar(&m.loraF32, "lora-f32", false, "keep run-time adapters in float32 (exact, twice the memory and bandwidth) instead of binary16")
	f.BoolVar(&m.loraQ8, "lora-q8", false, "keep run-time adapters in 8 bits (a scale per row: half the memory of binary16, slightly less exact)")
	m.stateBudget = load.StateBudget
	f.Var(&m.stateBudget, "state-budget", stateBudgetUsage)
	return m
}

// open resolves the model (the demo model when none is named, a Hub
// reference pulled first) and opens it, compiling a checkpoint into the
// cache with c's extra options; notes go to note, the compile progress
// to log (nil: none).
func (mf *modelFlags) open(note, log io.Writer, c compile.Options) (*aotlm.Model, error) {
	if err := mf.checkCtx(); err != nil {
		return nil, err
	}
	if len(mf.paths) == 1 {
		mf.path = mf.paths[0]
	}
	var err error
	if mf.path, err = resolveModel(mf.path, note); err != nil {
		return nil, err
	}
	if mf.path, err = resolveModelArg(mf.path, note); err != nil {
		return nil, err
	}
	return mf.openPath(mf.path, log, c)
}

// checkCtx checks --ctx; 0 means the model's trained context (an
// artifact's compiled one), and so does a value above it left as the
// default; a value given above the trained context is refused when the
// model opens.
func (mf *modelFlags) checkCtx() error {
	if _, err := load.StorageOf(mf.loraF32, mf.loraQ8); err != nil {
		return err
	} else if mf.ctx < 0 {
		return fmt.Errorf("--ctx %d: want a number of positions, or 0 for the model's trained context", mf.ctx)
	} else if mf.ctx == 0 {
		mf.ctx = 1 << 30
	}
	return nil
}

// loraStorage is how run-time adapters hold their matrices (checkCtx
// refuses both --lora-f32 and --lora-q8).
func (mf *modelFlags) loraStorage() load.AdapterStorage {
	s, _ := load.StorageOf(mf.loraF32, mf.loraQ8)
	return s
}

// openPath opens the model at path as open does, once it is resolved.
func (mf *modelFlags) openPath(path string, log io.Writer, c compile.Options) (*aotlm.Model, error) {
	asked := 0 // an explicit --ctx is served in full or refused
	if mf.flags != nil && mf.flags.Changed("ctx") && mf.ctx < 1<<30 {
		asked = mf.ctx
	}
	c.ARLens, c.Ctx, c.ClampCtx, c.KV, c.VisionLlamaCpp = []int{mf.arLen}, mf.ctx, asked == 0, mf.kv, mf.visionLlamaCpp
	m, err := load.Open(path, load.Options{Tokenizer: mf.tokenizer, Threads: mf.threads, Mode: mf.mode, Context: asked,
		HugePages: mf.hugePages, StateBudget: int64(mf.stateBudget), NoCompile: mf.noCompile, Compile: c, Log: log})
	if err != nil {
		return nil, err
	}
	if mf.template != "" {
		if err := load.SetChatTemplate(m, mf.template); err != nil {
			m.Close()
			return nil, err
		}
	}
	return m, nil
}
