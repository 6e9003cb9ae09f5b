package artifact

import (
	"errors"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// pretendHost makes the feature check see f as this machine's features for
// the rest of the test.
func pretendHost(t *testing.T, f Features) {
	old := hostFeatures
	hostFeatures = func() Features { return f }
	t.Cleanup(func() { hostFeatures = old })
}

func TestCPUFeatureRefused(t *testing.T) {
	s := newSample(2)
	s.features = AVX2 | AVX512VNNI | DotProd | I8MM
	path := filepath.Join(t.TempDir(), "f.aot")
	s.write(t, path)

	pretendHost(t, AVX2|FMA|DotProd)
	_, err := Open(path, OpenOptions{})
	var ce *CPUFeatureError
	if !errors.As(err, &ce) {
		t.Fatalf("got %v, want a CPUFeatureError", err)
	}
	if ce.Missing != AVX512VNNI|I8MM || ce.Required != s.features {
		t.Errorf("missing %v, required %v", ce.Missing, ce.Required)
	}
	for _, w := range []string{"AVX512VNNI+I8MM", "AVX2+FMA+DOTPROD", runtime.GOARCH, "recompile"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not mention %q", err, w)
		}
	}

	pretendHost(t, s.features|AMXInt8)
	a, err := Open(path, OpenOptions{})
	if err != nil {
		t.Fatalf("host with every feature: %v", err)
	}
	defer a.Close()
	if a.RequiredFeatures() != s.features {
		t.Errorf("RequiredFeatures %v", a.RequiredFeatures())
	}
}

// TestReservedFeatureBit: a file requiring a bit this version does not
// name is refused as needing a missing feature, never silently accepted.
func TestReservedFeatureBit(t *testing.T) {
	_, b := sampleFile(t)
	b[32+5] = 1 // bit 40
	resealHeader(b)
	pretendHost(t, ^Features(0)&knownFeatures)
	_, err := openBytes(b, false)
	var ce *CPUFeatureError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "bit40") {
		t.Fatalf("got %v, want a CPUFeatureError naming bit40", err)
	}
	w, err := Create(filepath.Join(t.TempDir(), "x.aot"))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Abort()
	if err := w.SetRequiredFeatures(1 << 40); err == nil {
		t.Error("writer accepted a reserved feature bit")
	}
}

func TestFeatureNames(t *testing.T) {
	if Features(0).String() != "none" {
		t.Errorf("empty set prints %q", Features(0))
	}
	seen := map[string]bool{}
	for _, n := range featureNames {
		if n.f == 0 || n.f&(n.f-1) != 0 || seen[n.name] {
			t.Errorf("feature %s: bit %#x not a single unique bit", n.name, uint64(n.f))
		}
		seen[n.name] = true
		if (n.f < 1<<32) != (strings.HasPrefix(n.name, "AVX") || strings.HasPrefix(n.name, "AMX") || n.name == "FMA" || n.name == "F16C") {
			t.Errorf("feature %s in the wrong half (amd64 bits 0-31, arm64 bits 32-63)", n.name)
		}
		got, err := ParseFeatures(strings.ToLower(n.f.String()))
		if err != nil || got != n.f {
			t.Errorf("ParseFeatures(%q) = %v, %v", n.f, got, err)
		}
	}
	all, err := ParseFeatures(knownFeatures.String())
	if err != nil || all != knownFeatures {
		t.Errorf("round trip of all features: %v %v", all, err)
	}
	if _, err := ParseFeatures("AVX2+SSE9"); err == nil {
		t.Error("unknown feature name accepted")
	}
}

// TestDetectFeatures checks the detected set against the architecture:
// no feature of the other architecture, and arm64's mandatory ASIMD.
func TestDetectFeatures(t *testing.T) {
	f := DetectFeatures()
	switch runtime.GOARCH {
	case "amd64":
		if f>>32 != 0 {
			t.Errorf("amd64 machine reports arm64 features %v", f)
		}
	case "arm64":
		if f&(1<<32-1) != 0 || f&ASIMD == 0 {
			t.Errorf("arm64 machine reports %v", f)
		}
	}
	if f&^knownFeatures != 0 {
		t.Errorf("reserved bits detected: %v", f)
	}
}
