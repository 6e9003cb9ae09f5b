package plan

import (
	"errors"
	"strings"
	"testing"
)

func TestLayoutTags(t *testing.T) {
	for _, tag := range []string{"", "w8-rows", "f16-rows", "lpbq-b16", "lpbq-b32", "q4-g32-sym", "q4-g64-asym", "q4k-p", "q6k-p"} {
		l, err := ParseLayout(tag)
		if err != nil {
			t.Fatalf("%q: %v", tag, err)
		}
		if l.Tag() != tag {
			t.Fatalf("%q reads back as %q", tag, l.Tag())
		}
	}
	for _, tag := range []string{"w8", "lpbq-b0", "lpbq-b-3", "lpbq-32", "lpbq-b99999", "lpbq-b+32", "lpbq-b032", "q4-g32", "q4-g32-sy", "q4-x32-sym", "f16",
		"f16-rows-p", "f16-row", "F16-rows", "f16-rows-b32", "q4k", "q4k-p-p", "q4k-b32-p", "q6k", "q6k-p-p", "q6k-b32-p"} {
		if _, err := ParseLayout(tag); err == nil {
			t.Errorf("%q is accepted", tag)
		}
	}
}

// TestLayoutParts checks the part offsets of the byte layout written in
// WeightLayout's comment for a [3, 40] weight (blocks of 16: 3 per row).
func TestLayoutParts(t *testing.T) {
	cases := []struct {
		tag                       string
		codes, scales, zeros, nsc int64
		size                      int64
	}{
		{"w8-rows", -1, 120, -1, 3, 132},
		{"lpbq-b16", 120, 132, -1, 3, 144}, // 9 codes end at 129, aligned to 132
		{"q4-g16-sym", -1, 120, -1, 9, 156},
		{"q4-g16-asym", -1, 120, 156, 9, 192},
		{"f16-rows", -1, -1, -1, 0, 240}, // 120 binary16 values
	}
	for _, c := range cases {
		l, _ := ParseLayout(c.tag)
		p, err := l.Parts(3, 40)
		if err != nil {
			t.Fatal(err)
		}
		if p.Codes != c.codes || p.Scales != c.scales || p.Zeros != c.zeros || p.NScales != c.nsc || p.Size != c.size {
			t.Errorf("%s: parts %+v", c.tag, p)
		}
	}
	l, _ := ParseLayout("w8-rows")
	for _, s := range [][2]int64{{0, 4}, {4, 0}, {-1, 4}, {1 << 30, 1 << 30}} {
		if _, err := l.Parts(s[0], s[1]); err == nil {
			t.Errorf("shape %v accepted", s)
		}
	}
	if _, err := (WeightLayout{}).Parts(2, 2); err == nil {
		t.Error("the plain layout has parts")
	}
	h, _ := ParseLayout("f16-rows")
	if !h.Half() || h.CanPack(64) {
		t.Errorf("f16-rows: half %v, packs %v", h.Half(), h.CanPack(64))
	}
	for _, bad := range []WeightLayout{{Kind: LayoutF16, Packed: true}, {Kind: LayoutF16, Block: 32}} {
		if _, err := bad.Parts(2, 64); err == nil {
			t.Errorf("%+v has parts", bad)
		}
	}
}

// TestLayoutQ4K checks q4k-p's parts: the codes, then a 48-byte record
// per 16 blocks of a row (a half record for K = 768 counts whole), and
// that K not a multiple of 256 is refused.
func TestLayoutQ4K(t *testing.T) {
	l, err := ParseLayout("q4k-p")
	if err != nil || !l.Packed || !l.CanPack(768) || l.CanPack(544) {
		t.Fatalf("q4k-p: %+v, %v", l, err)
	}
	for _, c := range []struct{ n, k, size int64 }{
		{3, 256, 3*128 + 3*48},
		{3, 768, 3*384 + 3*2*48},
		{2, 1024, 2*512 + 2*2*48},
	} {
		p, err := l.Parts(c.n, c.k)
		if err != nil {
			t.Fatal(err)
		}
		if p.Codes != -1 || p.Zeros != -1 || p.Scales != c.n*c.k/2 || p.Size != c.size || 4*p.NScales != c.size-p.Scales {
			t.Errorf("[%d, %d]: parts %+v, want size %d", c.n, c.k, p, c.size)
		}
	}
	if _, err := l.Parts(2, 544); err == nil {
		t.Error("q4k-p with 544 inputs has parts")
	}
}

// TestLayoutQ6K checks q6k-p's planes: nib (K/2 a row), hi (K/4), sub
// (K/16), then d (a float32 per 256), and that K not a multiple of 256 is
// refused.
func TestLayoutQ6K(t *testing.T) {
	l, err := ParseLayout("q6k-p")
	if err != nil || !l.Packed || l.Kind != LayoutQ6K || !l.CanPack(768) || l.CanPack(544) {
		t.Fatalf("q6k-p: %+v, %v", l, err)
	}
	for _, c := range []struct{ n, k int64 }{{3, 256}, {2, 1024}, {5, 768}} {
		p, err := l.Parts(c.n, c.k)
		if err != nil {
			t.Fatal(err)
		}
		nk := c.n * c.k
		if p.Codes != nk/2 || p.Sub != nk/2+nk/4 || p.Scales != p.Sub+nk/16 || p.NScales != nk/256 ||
			p.Size != p.Scales+4*nk/256 || p.Zeros != -1 || p.Scales%4 != 0 {
			t.Errorf("[%d, %d]: parts %+v", c.n, c.k, p)
		}
		if bits := float64(8*p.Size) / float64(nk); bits != 6.625 {
			t.Errorf("[%d, %d]: %g bits a weight", c.n, c.k, bits)
		}
	}
	if _, err := l.Parts(2, 544); err == nil {
		t.Error("q6k-p with 544 inputs has parts")
	}
}

// TestKVCacheRefused checks that a bad quantized cache description is
// refused with the offending field named.
func TestKVCacheRefused(t *testing.T) {
	ok := func() *KVCache {
		return &KVCache{DType: KVCacheU8, K: [][]float32{{0.1}, {0.1, 0.2}}, V: [][]float32{{0.3}, {0.1, 0.2}}}
	}
	cases := []struct {
		field string
		edit  func(c *KVCache)
	}{
		{"manifest.kv_cache.dtype", func(c *KVCache) { c.DType = "f8" }},
		{"manifest.kv_cache", func(c *KVCache) { c.DType = "f16" }}, // f16 takes no scales
		{"manifest.kv_cache", func(c *KVCache) { c.DType = "q4" }},  // nor does q4
		{"manifest.kv_cache", func(c *KVCache) { c.DType = "q4v" }}, // nor q4v
		{"manifest.kv_cache", func(c *KVCache) { c.V = c.V[:1] }},
		{"manifest.kv_cache.k_scales[1]", func(c *KVCache) { c.K[1] = nil }},
		{"manifest.kv_cache.v_scales[0][0]", func(c *KVCache) { c.V[0][0] = -1 }},
		{"manifest.kv_cache.k_scales[1][1]", func(c *KVCache) { c.K[1][1] = float32(inf()) }},
	}
	for _, c := range cases {
		m := Manifest{Format: ManifestFormat, Vocab: 10, Ctx: 8, BOS: -1, Plans: []PlanRef{{ARLen: 1, Blob: "p"}}, KVCache: ok()}
		if err := m.Validate(); err != nil {
			t.Fatal(err)
		}
		c.edit(m.KVCache)
		err := m.Validate()
		var pe *Error
		if !errors.As(err, &pe) || pe.Field != c.field {
			t.Errorf("want field %s, got %v", c.field, err)
		}
	}
}

func inf() float64 { var z float64; return 1 / z }

// FuzzParseLayout: any tag parses or is refused without panicking, a
// parsed tag prints back to itself, and Parts never panics.
func FuzzParseLayout(f *testing.F) {
	for _, s := range []string{"", "w8-rows", "f16-rows", "f16-rows-p", "lpbq-b32", "q4-g32-sym", "q4-g16-asym", "lpbq-b", "q4--", "lpbq-b+7", "q4-g0x10-sym", strings.Repeat("q4-", 50)} {
		f.Add(s, int64(3), int64(40))
	}
	f.Fuzz(func(t *testing.T, tag string, n, k int64) {
		l, err := ParseLayout(tag)
		if err != nil {
			return
		}
		if l.Tag() != tag {
			t.Fatalf("%q reads back as %q", tag, l.Tag())
		}
		// every part is 4-aligned; f16-rows has none (-1)
		if p, err := l.Parts(n, k); err == nil && (p.Size < n*k || (p.Scales%4 != 0 && !(l.Half() && p.Scales == -1))) {
			t.Fatalf("%q [%d,%d]: parts %+v", tag, n, k, p)
		}
	})
}

// TestKVCacheCentersRefused: a 4-bit cache's centers must be finite and
// given for as many layers for keys as for values; a binary16 or uint8
// cache has none.
func TestKVCacheCentersRefused(t *testing.T) {
	ok := func() *KVCache {
		return &KVCache{DType: KVCacheQ4, KMean: [][]float32{{0.1, -2}, {3, 4}}, VMean: [][]float32{{1, 2}, {0, 0}}}
	}
	cases := []struct {
		field string
		edit  func(c *KVCache)
	}{
		{"manifest.kv_cache", func(c *KVCache) { c.DType = KVCacheF16 }},
		{"manifest.kv_cache", func(c *KVCache) { c.VMean = c.VMean[:1] }},
		{"manifest.kv_cache.k_means[1][0]", func(c *KVCache) { c.KMean[1][0] = float32(inf()) }},
		{"manifest.kv_cache.v_means[0][1]", func(c *KVCache) { c.VMean[0][1] = float32(inf() - inf()) }},
		{"manifest.kv_cache", func(c *KVCache) {
			c.DType, c.K, c.V = KVCacheU8, [][]float32{{1}, {1}}, [][]float32{{1}, {1}}
		}},
	}
	for _, c := range cases {
		m := Manifest{Format: ManifestFormat, Vocab: 10, Ctx: 8, BOS: -1, Plans: []PlanRef{{ARLen: 1, Blob: "p"}}, KVCache: ok()}
		if err := m.Validate(); err != nil {
			t.Fatal(err)
		}
		c.edit(m.KVCache)
		err := m.Validate()
		var pe *Error
		if !errors.As(err, &pe) || pe.Field != c.field {
			t.Errorf("want field %s, got %v", c.field, err)
		}
	}
}
