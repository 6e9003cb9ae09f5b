// Command loragen writes the tiny random LoRA adapters of the package's
// tests for an arch fixture (a Hugging Face folder of a random-weight
// model): a PEFT folder (adapter_config.json and
// adapter_model.safetensors, float32) and the same adapter as
// llama.cpp's GGUF adapter (adapter.gguf), written by aotlm's own GGUF
// writer in llama.cpp's adapter format.
//
//	go run ./internal/lora/loragen -model FIXTURE_DIR -o internal/lora/testdata/llama -seed 1
//
// The adapter has rank 4 (-rank) and alpha 2·rank on every layer's q, k,
// v and o projections and the MLP's gate, up and down; A ~ N(0, 1/in)
// and B ~ N(0, 0.075²), so that it moves the logits visibly. A GGUF
// model (-model FILE.gguf, for speed measurements) gets the PEFT folder
// only.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/aotlm/aotlm/internal/arch"
	"github.com/aotlm/aotlm/internal/format/detect"
	"github.com/aotlm/aotlm/internal/format/safetensors"
	"github.com/aotlm/aotlm/internal/lora"
	"github.com/aotlm/aotlm/internal/tensor"
)

// targets are the module names the adapter adapts.
var targets = []string{"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}

// sigB is the deviation of B's values.
const sigB = 0.075

func main() {
	model := flag.String("model", "", "the fixture's Hugging Face folder")
	out := flag.String("o", "", "output folder")
	seed := flag.Uint64("seed", 1, "random seed")
	rank := flag.Int("rank", 4, "rank")
	flag.Parse()
	if *model == "" || *out == "" {
		fmt.Fprintln(os.Stderr, "usage: loragen -model DIR -o DIR [-seed N]")
		os.Exit(2)
	}
	if err := run(*model, *out, *seed, *rank); err != nil {
		fmt.Fprintln(os.Stderr, "loragen:", err)
		os.Exit(1)
	}
}

func run(model, out string, seed uint64, rank int) error {
	if rank < 1 {
		return fmt.Errorf("rank %d: want at least 1", rank)
	}
	ck, err := detect.Open(model)
	if err != nil {
		return err
	}
	defer ck.Close()
	src, err := arch.Open(ck)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	rng := rand.New(rand.NewPCG(seed, 0x10ad))
	var ts []safetensors.Tensor
	for _, name := range src.Names() {
		mod, ok := strings.CutSuffix(name, ".weight")
		if !ok || !slices.ContainsFunc(targets, func(t string) bool { return strings.HasSuffix(mod, "."+t) }) {
			continue
		}
		sh := src.Shapes[name]
		outDim, in := sh[0], sh[1]
		r := int64(rank)
		a := make([]float32, rank*in)
		for i := range a {
			a[i] = float32(rng.NormFloat64() / math.Sqrt(float64(in)))
		}
		b := make([]float32, outDim*rank)
		for i := range b {
			b[i] = float32(rng.NormFloat64() * sigB)
		}
		ts = append(ts,
			safetensors.Tensor{Name: "base_model.model." + mod + ".lora_A.weight", DType: tensor.F32, Shape: []int64{r, int64(in)}, Data: a},
			safetensors.Tensor{Name: "base_model.model." + mod + ".lora_B.weight", DType: tensor.F32, Shape: []int64{int64(outDim), r}, Data: b})
	}
	cfg := map[string]any{
		"peft_type": "LORA", "r": rank, "lora_alpha": 2 * rank, "target_modules": targets,
		"use_rslora": false, "use_dora": false, "bias": "none", "fan_in_fan_out": false,
		"task_type": "CAUSAL_LM", "base_model_name_or_path": "arch/" + filepath.Base(filepath.Clean(model)),
	}
	js, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(out, lora.ConfigName), append(js, '\n'), 0o644); err != nil {
		return err
	}
	if err := safetensors.Write(filepath.Join(out, lora.WeightsName), ts, map[string]string{"format": "pt"}); err != nil {
		return err
	}
	if src.Config.Source != "hf" {
		return nil
	}
	a, err := lora.ReadPEFT(out)
	if err != nil {
		return err
	}
	pairs, al, err := lora.ToGGUF(a, &src.Config, src.Shapes)
	if err != nil {
		return err
	}
	ga, ok := ggufArch(src.Config.Family)
	if !ok {
		return fmt.Errorf("no GGUF architecture for family %s", src.Config.Family)
	}
	return lora.WriteGGUF(filepath.Join(out, "adapter.gguf"), ga, al, pairs, false)
}

// ggufArch is llama.cpp's architecture name of a family.
func ggufArch(family string) (string, bool) {
	switch family {
	case "llama", "qwen2", "qwen3", "gemma", "gemma3", "phi3", "granite", "smollm3":
		return family, true
	case "glm":
		return "chatglm", true
	}
	return "", false
}
