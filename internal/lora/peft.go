package lora

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/aotlm/aotlm/internal/format/safetensors"
)

// ConfigName and WeightsName are the files of a PEFT adapter folder.
const (
	ConfigName  = "adapter_config.json"
	WeightsName = "adapter_model.safetensors"
)

// peftConfig holds the fields of adapter_config.json this package reads.
type peftConfig struct {
	PeftType      string             `json:"peft_type"`
	BaseModel     string             `json:"base_model_name_or_path"`
	R             int                `json:"r"`
	Alpha         float64            `json:"lora_alpha"`
	Targets       json.RawMessage    `json:"target_modules"`
	RSLoRA        bool               `json:"use_rslora"`
	DoRA          bool               `json:"use_dora"`
	RankPattern   map[string]int     `json:"rank_pattern"`
	AlphaPattern  map[string]float64 `json:"alpha_pattern"`
	FanInFanOut   bool               `json:"fan_in_fan_out"`
	Bias          string             `json:"bias"`
	ModulesToSave []string           `json:"modules_to_save"`
}

// ReadPEFT reads the PEFT LoRA adapter in dir.
func ReadPEFT(dir string) (*Adapter, error) {
	raw, err := os.ReadFile(filepath.Join(dir, ConfigName))
	if err != nil {
		return nil, fmt.Errorf("lora: %w", err)
	}
	var c peftConfig
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, fmt.Errorf("lora: %s: %w", filepath.Join(dir, ConfigName), err)
	}
	where := filepath.Join(dir, ConfigName)
	switch {
	case c.PeftType != "" && c.PeftType != "LORA":
		return nil, fmt.Errorf("lora: %s: peft_type %q is not LORA", where, c.PeftType)
	case c.R <= 0:
		return nil, fmt.Errorf("lora: %s: r is %d, want a positive rank", where, c.R)
	case c.FanInFanOut:
		return nil, fmt.Errorf("lora: %s: fan_in_fan_out adapters (Conv1D models) are not supported", where)
	case c.Bias != "" && c.Bias != "none":
		return nil, fmt.Errorf("lora: %s: bias %q: trained biases are not supported", where, c.Bias)
	case len(c.ModulesToSave) > 0:
		return nil, fmt.Errorf("lora: %s: modules_to_save %v: fully trained modules are not supported", where, c.ModulesToSave)
	case math.IsNaN(c.Alpha) || math.IsInf(c.Alpha, 0):
		return nil, fmt.Errorf("lora: %s: lora_alpha is not finite", where)
	}
	if c.Alpha == 0 {
		c.Alpha = 8 // PEFT's default
	}
	a := &Adapter{Path: dir, Format: "peft", Arch: c.BaseModel, Rank: c.R, Alpha: c.Alpha,
		RSLoRA: c.RSLoRA, DoRA: c.DoRA, Pairs: map[string]*Pair{}}
	if len(c.Targets) > 0 {
		var list []string
		var one string
		if json.Unmarshal(c.Targets, &list) == nil {
			a.TargetNames = list
		} else if json.Unmarshal(c.Targets, &one) == nil {
			a.TargetNames = []string{one}
		}
	}
	wpath := filepath.Join(dir, WeightsName)
	ck, err := safetensors.Open(wpath)
	if err != nil {
		return nil, fmt.Errorf("lora: %w", err)
	}
	defer ck.Close()
	type parts struct{ a, b, m string }
	modules := map[string]*parts{}
	for _, t := range ck.Tensors() {
		name := strings.TrimPrefix(t.Name, "base_model.model.")
		var mod, kind string
		for _, suf := range []string{".lora_A.weight", ".lora_B.weight", ".lora_magnitude_vector.weight", ".lora_magnitude_vector",
			".lora_A.default.weight", ".lora_B.default.weight", ".lora_magnitude_vector.default.weight"} {
			if strings.HasSuffix(name, suf) {
				mod, kind = strings.TrimSuffix(name, suf), strings.Split(suf, ".")[1]
				break
			}
		}
		if mod == "" {
			return nil, fmt.Errorf("lora: %s: tensor %q is not a LoRA matrix (lora_A, lora_B or DoRA's lora_magnitude_vector of a linear)", wpath, t.Name)
		}
		p := modules[mod]
		if p == nil {
			p = &parts{}
			modules[mod] = p
		}
		switch kind {
		case "lora_A":
			p.a = t.Name
		case "lora_B":
			p.b = t.Name
		default:
			p.m = t.Name
		}
	}
	if len(modules) == 0 {
		return nil, fmt.Errorf("lora: %s holds no LoRA matrices", wpath)
	}
	shapes := map[string][]int64{}
	for _, t := range ck.Tensors() {
		shapes[t.Name] = t.Shape
	}
	for mod, p := range modules {
		if p.a == "" || p.b == "" {
			return nil, fmt.Errorf("lora: %s: module %s has lora_A %q and lora_B %q: both are needed", wpath, mod, p.a, p.b)
		}
		sa, sb := shapes[p.a], shapes[p.b]
		if len(sa) != 2 || len(sb) != 2 || sa[0] != sb[1] {
			return nil, fmt.Errorf("lora: %s: module %s: lora_A %v and lora_B %v are not [r, in] and [out, r]", wpath, mod, sa, sb)
		}
		pr := &Pair{Rank: int(sa[0]), In: int(sa[1]), Out: int(sb[0])}
		if pr.A, err = ck.ReadFloat32(p.a); err != nil {
			return nil, fmt.Errorf("lora: %s: %w", wpath, err)
		}
		if pr.B, err = ck.ReadFloat32(p.b); err != nil {
			return nil, fmt.Errorf("lora: %s: %w", wpath, err)
		}
		if p.m != "" {
			if pr.Magnitude, err = ck.ReadFloat32(p.m); err != nil {
				return nil, fmt.Errorf("lora: %s: %w", wpath, err)
			}
		} else if c.DoRA {
			return nil, fmt.Errorf("lora: %s: use_dora is set but module %s has no lora_magnitude_vector", wpath, mod)
		}
		alpha := c.Alpha
		if v, ok := matchPattern(c.AlphaPattern, mod); ok {
			alpha = v
		}
		r := float64(pr.Rank)
		if c.RSLoRA {
			pr.Scale = float32(alpha / math.Sqrt(r))
		} else {
			pr.Scale = float32(alpha / r)
		}
		name := mod + ".weight"
		if err := pr.check(name); err != nil {
			return nil, err
		}
		a.Pairs[name] = pr
	}
	return a, nil
}

// matchPattern finds the value of the first key of m that names module
// as PEFT's rank_pattern and alpha_pattern do: the key, a regular
// expression, matches a suffix of the module path made of whole
// segments.
func matchPattern[V any](m map[string]V, module string) (V, bool) {
	var zero V
	keys := slices.Sorted(maps.Keys(m))
	for _, k := range keys {
		v := m[k]
		if module == k || strings.HasSuffix(module, "."+k) {
			return v, true
		}
	}
	for _, k := range keys {
		v := m[k]
		re, err := regexp.Compile(`^(?:.*\.)?(?:` + k + `)$`)
		if err == nil && re.MatchString(module) {
			return v, true
		}
	}
	return zero, false
}
