package load

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/aotlm/aotlm"
	"github.com/aotlm/aotlm/internal/compile"
	"github.com/aotlm/aotlm/internal/lora"
)

// FloatActivations parses an --activations value: "int8" (packed weights,
// int8 activations) or "float" (float32 activations).
func FloatActivations(v string) (bool, error) {
	switch v {
	case "int8":
		return false, nil
	case "float":
		return true, nil
	}
	return false, fmt.Errorf("--activations %q: want int8 or float", v)
}

// CheckGGUFWeights checks a --gguf-weights value against
// compile.GGUFWeightModes.
func CheckGGUFWeights(v string) error {
	if !slices.Contains(compile.GGUFWeightModes, v) {
		return fmt.Errorf("--gguf-weights %q: want %s", v, strings.Join(compile.GGUFWeightModes, " or "))
	}
	return nil
}

// LookaheadARLen parses a lookahead spec "N,W,G" into the length of the
// plan its passes need: (W+G)(N-1) rows rounded up to a power of two; ""
// is 0.
func LookaheadARLen(spec string) (int, error) {
	if spec == "" {
		return 0, nil
	}
	bad := fmt.Errorf("--lookahead %q is not N,W,G (such as 3,5,3)", spec)
	parts := strings.Split(spec, ",")
	if len(parts) != 3 {
		return 0, bad
	}
	var v [3]int
	for i, p := range parts {
		n, err := strconv.Atoi(strings.TrimSpace(p))
		if err != nil {
			return 0, bad
		}
		v[i] = n
	}
	l := aotlm.LookaheadOptions{N: v[0], W: v[1], G: v[2]}
	if _, err := aotlm.Lookahead(l); err != nil {
		return 0, fmt.Errorf("--%w", err)
	}
	n := 1
	for n < l.Rows() {
		n *= 2
	}
	return n, nil
}

// LoRASpecs parses --lora values, each DIR[:SCALE] or FILE.gguf[:SCALE]
// (lora.ParseSpec).
func LoRASpecs(values []string) ([]lora.Spec, error) {
	var specs []lora.Spec
	for _, v := range values {
		sp, err := lora.ParseSpec(v)
		if err != nil {
			return nil, fmt.Errorf("--lora: %w", err)
		}
		specs = append(specs, sp)
	}
	return specs, nil
}
