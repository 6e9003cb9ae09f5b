package vision

import (
	"fmt"
	"strconv"
	"strings"
)

// Bucket is an image size a compiled Qwen2-VL encoder is planned for: W x
// H pixels, both multiples of the processing's Align. A compiled encoder
// reads a fixed number of patch rows, so an image is resized to one of
// the artifact's buckets rather than to its own size.
type Bucket struct{ W, H int }

// String is the bucket as HxW, the order of vision plan names.
func (b Bucket) String() string { return fmt.Sprintf("%dx%d", b.H, b.W) }

// defaultGrids are the default buckets in merged tokens (rows, cols):
// square, 3:4 and 4:3, 9:16 and 16:9 images at a few sizes, at most 576
// tokens (2304 patch rows): an encoder's activations grow with its rows
// (Qwen2-VL-2B's arena: 20 MiB at 256 rows, 179 MiB at 2304).
var defaultGrids = [][2]int{
	{8, 8}, {16, 16}, {24, 24},
	{12, 16}, {16, 12}, {18, 24}, {24, 18},
	{9, 16}, {16, 9}, {18, 32}, {32, 18},
}

// DefaultBuckets returns the buckets an encoder is compiled for when none
// are named: square, 3:4, 4:3, 9:16 and 16:9 grids of 64 to 576 merged
// tokens; for patch 14 and merge 2 (HxW) 224x224, 448x448, 672x672,
// 336x448, 448x336, 504x672, 672x504, 252x448, 448x252, 504x896 and
// 896x504.
func (p Qwen2VL) DefaultBuckets() []Bucket {
	var b []Bucket
	for _, g := range defaultGrids {
		b = append(b, Bucket{W: g[1] * p.Align, H: g[0] * p.Align})
	}
	return b
}

// ParseBuckets reads a comma-separated list of HxW sizes in pixels
// ("448x448,336x448"), each a multiple of align.
func ParseBuckets(s string, align int) ([]Bucket, error) {
	var out []Bucket
	seen := map[Bucket]bool{}
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		hs, ws, ok := strings.Cut(f, "x")
		h, err1 := strconv.Atoi(hs)
		w, err2 := strconv.Atoi(ws)
		if !ok || err1 != nil || err2 != nil {
			return nil, fmt.Errorf("image size %q is not HEIGHTxWIDTH in pixels", f)
		}
		b := Bucket{W: w, H: h}
		if err := b.Check(align); err != nil {
			return nil, err
		}
		if !seen[b] {
			seen[b] = true
			out = append(out, b)
		}
	}
	return out, nil
}

// maxBucketSide bounds a bucket's sides (a plan's rows must stay within
// the engine's limits).
const maxBucketSide = 1 << 13

// Check reports whether b's sides are positive multiples of align of at
// most 8192 pixels.
func (b Bucket) Check(align int) error {
	if align <= 0 || b.W <= 0 || b.H <= 0 || b.W%align != 0 || b.H%align != 0 || b.W > maxBucketSide || b.H > maxBucketSide {
		return fmt.Errorf("image size %s: the sides must be multiples of %d between %d and %d pixels", b, align, align, maxBucketSide)
	}
	return nil
}

// Fit returns the bucket an image of w x h encodes in: the one of least
// area (then least height) holding its smart-resized size (Size), so
// that an image whose smart-resized size is a bucket encodes exactly as
// llama.cpp encodes it. ok is false when no bucket holds it.
func (p Qwen2VL) Fit(w, h int, buckets []Bucket) (b Bucket, ok bool) {
	sw, sh := p.Size(w, h)
	for _, c := range buckets {
		if c.W < sw || c.H < sh {
			continue
		}
		if !ok || c.W*c.H < b.W*b.H || (c.W*c.H == b.W*b.H && c.H < b.H) {
			b, ok = c, true
		}
	}
	return b, ok
}

// FitShrunk is Fit for an image no bucket holds: the bucket the image,
// scaled down to fit it keeping its aspect ratio (as PreprocessBucket
// letterboxes it), stays largest in (then the one of least area). ok is
// false when even there the image's short side would be under Align
// pixels (an aspect ratio far from every bucket's).
func (p Qwen2VL) FitShrunk(w, h int, buckets []Bucket) (b Bucket, ok bool) {
	if w <= 0 || h <= 0 {
		return Bucket{}, false
	}
	best := 0.0
	for _, c := range buckets {
		s := min(float64(c.W)/float64(w), float64(c.H)/float64(h))
		if s > best || (s == best && ok && c.W*c.H < b.W*b.H) {
			b, best, ok = c, s, true
		}
	}
	if !ok || float64(min(w, h))*best < float64(p.Align) {
		return Bucket{}, false
	}
	return b, true
}

// PreprocessBucket resizes img into bucket b as Preprocess resizes it
// into its own size: bilinearly, keeping its aspect ratio, centered on
// black (mtmd's letterbox). When b is the image's smart-resized size the
// result is Preprocess's.
func (p Qwen2VL) PreprocessBucket(img *RGB, b Bucket) (*RGB, error) {
	if err := b.Check(p.Align); err != nil {
		return nil, fmt.Errorf("qwen2-vl preprocessing: %w", err)
	}
	if img.W <= 0 || img.H <= 0 {
		return nil, fmt.Errorf("qwen2-vl preprocessing: empty image %dx%d", img.W, img.H)
	}
	return padResize(img, b.W, b.H, resizeBilinear), nil
}
