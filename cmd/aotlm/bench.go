package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"runtime"

	"github.com/spf13/cobra"

	"github.com/aotlm/aotlm/internal/bench"
	"github.com/aotlm/aotlm/internal/load"
)

func newBenchCmd() *cobra.Command {
	var (
		modelPath, mode string
		prompts, gens   []int
		pgs             []string
		cfg             bench.Config
		asJSON, noWarm  bool
		seed            uint64
		depth           int
		cpuProfile      string
		dec             *benchDecodingFlags
		imageFile       string
		mmproj, tokPath string
		llamaCpp, f32   bool
		q8              bool
		loraSpec        string
	)
	cmd := &cobra.Command{
		Use:   "bench [-m MODEL.aot]",
		Short: "Measure prefill and decode speed of a compiled artifact",
		Long:  help("bench"),
		Example: `  aotlm bench -m stories.aot -p 128,512 -n 128 -pg 512,128 -t 4
  aotlm bench -m stories.aot -p 64 -n 32 -r 5 --mode kv --json
  aotlm bench -m qwen3.aot -p 512 -n 128 -d 3968 -t 2
  aotlm bench -m SmolVLM-256M-Instruct --image photo.jpg -p 0 -n 0 -t 2`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cfg.Floor && dec.active() {
				return fmt.Errorf("bench: --floor measures the plain decode tests (-n, --pg), not a decoding strategy or --verify-rows")
			}
			tests, err := bench.ParseTests(prompts, gens, pgs)
			switch {
			case dec.active():
				tests = nil
			case imageFile != "" && errors.Is(err, bench.ErrNoTests): // the image alone
			case err != nil:
				return err
			}
			if tests, err = bench.AtDepth(tests, depth); err != nil {
				return err
			}
			if cpuProfile != "" {
				stop, err := bench.StartCPUProfile(cpuProfile)
				if err != nil {
					return err
				}
				defer stop()
			}
			cfg.Tests, cfg.Mode, cfg.Warmup, cfg.Seed = tests, mode, !noWarm, seed
			if imageFile != "" {
				return benchImage(cmd, modelPath, mmproj, tokPath, imageFile, llamaCpp, cfg, asJSON)
			}
			art, err := benchArtifact(modelPath, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			if dec.active() {
				return dec.run(cmd, art, cfg.Threads, append(gens, 128)[0], cfg.Repetitions, asJSON)
			}
			st, err := load.StorageOf(f32, q8)
			if err != nil {
				return err
			}
			if cfg.Adapter, err = load.BenchAdapter(loraSpec, st); err != nil {
				return err
			}
			rep, err := bench.RunArtifact(art, cfg)
			if err != nil {
				return err
			}
			if asJSON {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(rep)
			}
			return rep.WriteTable(cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.StringVarP(&modelPath, "model", "m", "", "compiled artifact (.aot) to measure (default: the built-in demo model); a model or Hub repository is compiled into the cache first, as run does")
	f.IntSliceVarP(&prompts, "n-prompt", "p", []int{512}, "prompt lengths of pp tests, comma-separated (0: none)")
	f.IntSliceVarP(&gens, "n-gen", "n", []int{128}, "decode lengths of tg tests, comma-separated (0: none)")
	f.StringArrayVar(&pgs, "pg", nil, "a pg test as PROMPT,GEN (repeatable)")
	f.IntVarP(&depth, "depth", "d", 0, "prefill this many tokens untimed before each repetition of every test (llama-bench's -d): the pp, tg and pg tests then run over a cache that many positions deep")
	f.IntVarP(&cfg.Context, "ctx", "c", 0, "cache positions (0: the artifact's compiled context; more, up to the model's trained context, extends it without compiling again)")
	f.IntVarP(&cfg.Threads, "threads", "t", runtime.GOMAXPROCS(0), "threads")
	f.BoolVar(&cfg.HugePages, "hugepages", false, hugePagesUsage)
	f.BoolVar(&cfg.Floor, "floor", false, "measure each decoding test against the decode floor: before every repetition and after the last, time a plain read of the weights a token streams (the same mapped bytes, split over the same threads; vector loads, the faster of reading with and without asking for the lines ahead), and print the floor in tok/s (those bytes and the keys and values a step reads at the test's depth, over the read's bandwidth) and the share of it the decode reached; then the same from memory: the weights evicted from every cache before each read (amd64), the floor of memory bandwidth, which a model that stays in the last-level cache decodes above")
	f.IntVarP(&cfg.Repetitions, "repetitions", "r", 3, "repetitions of each test")
	f.StringVar(&mode, "mode", "hybrid", "prefill: hybrid (AR-N passes) or kv (one token at a time)")
	f.BoolVar(&asJSON, "json", false, "print one JSON object instead of the table")
	f.BoolVar(&noWarm, "no-warmup", false, "skip the untimed warm-up pass")
	f.Uint64Var(&seed, "seed", 1, "seed of the random prompt ids")
	f.StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of the whole run to this file (read it with go tool pprof)")
	f.StringVar(&imageFile, "image", "", "measure an image through a vision-language model (-m a SmolVLM, Qwen2-VL or InternVL folder or artifact, or a text GGUF with --mmproj): "+
		"decoding, preprocessing and encoding it, and the prefill of its tokens; the usual tests follow unless -p 0 -n 0")
	f.StringVar(&mmproj, "mmproj", "", "llama.cpp's vision GGUF (mmproj) for a text GGUF given with -m, with --image")
	f.StringVar(&tokPath, "tokenizer", "", "tokenizer file or folder, for a model folder without one, with --image")
	f.BoolVar(&llamaCpp, "vision-llama-cpp", false, visionLlamaCppHelp)
	f.StringVar(&loraSpec, "lora", "", "PATH[:SCALE]: measure with this LoRA adapter applied at run time")
	f.BoolVar(&f32, "lora-f32", false, "keep the --lora adapter in float32 instead of binary16")
	f.BoolVar(&q8, "lora-q8", false, "keep the --lora adapter in 8 bits (a scale per row) instead of binary16")
	dec = addBenchDecodingFlags(cmd)
	return cmd
}

// benchArtifact gives the artifact to measure: an .aot as it is, else the
// model (a path, a Hub repository, or the demo model when none is named)
// compiled into the cache with run's default options, so bench and run
// share it.
func benchArtifact(flag string, stderr io.Writer) (string, error) {
	path, err := resolveModel(flag, stderr)
	if err == nil {
		path, err = resolveModelArg(path, stderr)
	}
	if err != nil {
		return "", err
	}
	return load.Cached(path, load.CompileDefaults(), stderr)
}
