package artifact

import (
	"fmt"
	"math/bits"
	"runtime"
	"strings"

	"golang.org/x/sys/cpu"
)

// Features is a set of CPU instruction-set extensions, one bit each. An
// artifact records the features its chosen kernels execute; Open refuses it
// on a machine that lacks any of them. Bits 0-31 are amd64 extensions,
// bits 32-63 arm64 extensions; bits not named below are reserved.
type Features uint64

// CPU features an artifact may require.
const (
	AVX2       Features = 1 << 0  // amd64: 256-bit integer SIMD
	FMA        Features = 1 << 1  // amd64: fused multiply-add (FMA3)
	F16C       Features = 1 << 2  // amd64: f16 <-> f32 conversion
	AVXVNNI    Features = 1 << 3  // amd64: VEX-encoded VPDPBUSD on 256 bits
	AVX512F    Features = 1 << 4  // amd64: AVX-512 foundation
	AVX512BW   Features = 1 << 5  // amd64: AVX-512 byte and word
	AVX512VL   Features = 1 << 6  // amd64: AVX-512 on 128/256-bit vectors
	AVX512VNNI Features = 1 << 7  // amd64: AVX-512 VPDPBUSD
	AVX512BF16 Features = 1 << 8  // amd64: AVX-512 bf16 dot products
	AMXTile    Features = 1 << 9  // amd64: AMX tile registers
	AMXInt8    Features = 1 << 10 // amd64: AMX int8 tile multiply
	AMXBF16    Features = 1 << 11 // amd64: AMX bf16 tile multiply

	ASIMD   Features = 1 << 32 // arm64: Advanced SIMD (NEON)
	DotProd Features = 1 << 33 // arm64: SDOT/UDOT
	I8MM    Features = 1 << 34 // arm64: SMMLA/USMMLA int8 matrix multiply
	FP16    Features = 1 << 35 // arm64: half-precision SIMD arithmetic
	SVE     Features = 1 << 36 // arm64: scalable vectors
	SVE2    Features = 1 << 37 // arm64: scalable vectors 2
)

// featureNames lists the named features in bit order.
var featureNames = []struct {
	f    Features
	name string
}{
	{AVX2, "AVX2"}, {FMA, "FMA"}, {F16C, "F16C"}, {AVXVNNI, "AVXVNNI"},
	{AVX512F, "AVX512F"}, {AVX512BW, "AVX512BW"}, {AVX512VL, "AVX512VL"},
	{AVX512VNNI, "AVX512VNNI"}, {AVX512BF16, "AVX512BF16"},
	{AMXTile, "AMXTILE"}, {AMXInt8, "AMXINT8"}, {AMXBF16, "AMXBF16"},
	{ASIMD, "ASIMD"}, {DotProd, "DOTPROD"}, {I8MM, "I8MM"}, {FP16, "FP16"},
	{SVE, "SVE"}, {SVE2, "SVE2"},
}

// knownFeatures is the union of all named features.
var knownFeatures = func() Features {
	var all Features
	for _, n := range featureNames {
		all |= n.f
	}
	return all
}()

// String lists the features joined by "+" ("AVX2+FMA"), "none" for the
// empty set; reserved bits print as "bitN".
func (f Features) String() string {
	if f == 0 {
		return "none"
	}
	var parts []string
	for _, n := range featureNames {
		if f&n.f != 0 {
			parts = append(parts, n.name)
		}
	}
	for r := f &^ knownFeatures; r != 0; r &= r - 1 {
		parts = append(parts, fmt.Sprintf("bit%d", bits.TrailingZeros64(uint64(r))))
	}
	return strings.Join(parts, "+")
}

// ParseFeatures parses a list of feature names separated by "+" or ","
// (case-insensitive), as String writes it; "" and "none" are the empty set.
func ParseFeatures(s string) (Features, error) {
	var f Features
	for _, p := range strings.FieldsFunc(s, func(r rune) bool { return r == '+' || r == ',' || r == ' ' }) {
		if strings.EqualFold(p, "none") {
			continue
		}
		found := false
		for _, n := range featureNames {
			if strings.EqualFold(p, n.name) {
				f |= n.f
				found = true
				break
			}
		}
		if !found {
			return 0, fmt.Errorf("unknown CPU feature %q", p)
		}
	}
	return f, nil
}

// DetectFeatures returns the features of the machine the program runs on.
func DetectFeatures() Features {
	var f Features
	set := func(has bool, b Features) {
		if has {
			f |= b
		}
	}
	x := &cpu.X86
	set(x.HasAVX2, AVX2)
	set(x.HasFMA, FMA)
	set(x.HasF16C, F16C)
	set(x.HasAVXVNNI, AVXVNNI)
	set(x.HasAVX512F, AVX512F)
	set(x.HasAVX512BW, AVX512BW)
	set(x.HasAVX512VL, AVX512VL)
	set(x.HasAVX512VNNI, AVX512VNNI)
	set(x.HasAVX512BF16, AVX512BF16)
	set(x.HasAMXTile, AMXTile)
	set(x.HasAMXInt8, AMXInt8)
	set(x.HasAMXBF16, AMXBF16)
	a := &cpu.ARM64
	// Advanced SIMD is architecturally mandatory on arm64; some kernels do
	// not report it.
	set(runtime.GOARCH == "arm64" || a.HasASIMD, ASIMD)
	set(a.HasASIMDDP, DotProd)
	set(a.HasI8MM, I8MM)
	set(a.HasASIMDHP, FP16)
	set(a.HasSVE, SVE)
	set(a.HasSVE2, SVE2)
	return f
}

// hostArch is the GOARCH reported in CPU feature errors.
const hostArch = runtime.GOARCH

// hostFeatures returns this machine's features; tests replace it to
// pretend a feature is missing.
var hostFeatures = DetectFeatures

// checkFeatures returns a *CPUFeatureError when required holds a feature
// this machine lacks (reserved bits are always missing).
func checkFeatures(file string, required Features) error {
	host := hostFeatures()
	if missing := required &^ host; missing != 0 {
		return &CPUFeatureError{File: file, Required: required, Missing: missing, Host: host, Arch: hostArch}
	}
	return nil
}
