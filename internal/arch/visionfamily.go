package arch

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/aotlm/aotlm/internal/format"
)

// VisionFamily is how a vision-language family's encoder is recognized in
// a checkpoint: every layer above (compile, vlm) keys its own entry for
// the family by Name, so that no caller tests a family by hand.
type VisionFamily struct {
	// Name is the family's name in an artifact's manifest
	// (plan.Vision.Family).
	Name string
	// IsHF reports whether config.json metadata names a model of the
	// family.
	IsHF func(meta map[string]any) bool
	// Projectors are the clip.projector_type values of its mmproj files.
	Projectors []string
}

var visionFamilies []*VisionFamily

func registerVision(f *VisionFamily) { visionFamilies = append(visionFamilies, f) }

// VisionFamilies lists the registered vision families, by name.
func VisionFamilies() []*VisionFamily {
	out := append([]*VisionFamily(nil), visionFamilies...)
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// VisionFamilyOfHF returns the family config.json metadata names, or nil
// for a model without a vision encoder aotlm reads.
func VisionFamilyOfHF(meta map[string]any) *VisionFamily {
	for _, f := range visionFamilies {
		if f.IsHF(meta) {
			return f
		}
	}
	return nil
}

// VisionFamilyOfMMProj returns the family of llama.cpp's mmproj GGUF
// file, by its projector type.
func VisionFamilyOfMMProj(mmproj format.Checkpoint) (*VisionFamily, error) {
	if mmproj.Format() != "gguf" {
		return nil, errors.New("mmproj: not a GGUF file")
	}
	m := mmproj.Metadata()
	if a, _ := format.MetaString(m, "general.architecture"); a != "clip" {
		return nil, fmt.Errorf("mmproj: general.architecture is %q, want clip", a)
	}
	p, _ := format.MetaString(m, "clip.projector_type")
	var known []string
	for _, f := range VisionFamilies() {
		for _, q := range f.Projectors {
			if q == p {
				return f, nil
			}
			known = append(known, q)
		}
	}
	return nil, fmt.Errorf("mmproj: projector type %q is not supported (want one of %s)", p, strings.Join(known, ", "))
}
