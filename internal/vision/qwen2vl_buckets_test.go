package vision

import (
	"bytes"
	"strings"
	"testing"
)

// TestBuckets: the default buckets for patch 14 and merge 2; Fit picks
// the bucket of least area holding the smart-resized size and
// PreprocessBucket into that size gives Preprocess's pixels exactly;
// FitShrunk scales a large image into the bucket it stays largest in and
// refuses an aspect ratio no bucket holds; bad lists are refused.
func TestBuckets(t *testing.T) {
	p := NewQwen2VL(14, 2)
	var got []string
	for _, b := range p.DefaultBuckets() {
		got = append(got, b.String())
	}
	want := "224x224 448x448 672x672 336x448 448x336 504x672 672x504 252x448 448x252 504x896 896x504"
	if strings.Join(got, " ") != want {
		t.Fatalf("default buckets %v, want %s", got, want)
	}
	buckets := p.DefaultBuckets()
	for _, c := range []struct{ w, h int }{{640, 480}, {480, 640}, {100, 100}, {800, 450}, {300, 200}} {
		b, ok := p.Fit(c.w, c.h, buckets)
		sw, sh := p.Size(c.w, c.h)
		if !ok || b.W < sw || b.H < sh {
			t.Fatalf("%dx%d (smart-resized %dx%d): bucket %s, %v", c.w, c.h, sw, sh, b, ok)
		}
		for _, o := range buckets {
			if o.W >= sw && o.H >= sh && o.W*o.H < b.W*b.H {
				t.Fatalf("%dx%d: bucket %s, but %s holds it and is smaller", c.w, c.h, b, o)
			}
		}
	}
	img := NewRGB(100, 60)
	for i := range img.Pix {
		img.Pix[i] = uint8(i*31 + i/7)
	}
	q := NewQwen2VL(8, 2)
	sw, sh := q.Size(img.W, img.H)
	a, err := q.Preprocess(img)
	if err != nil {
		t.Fatal(err)
	}
	b, err := q.PreprocessBucket(img, Bucket{W: sw, H: sh})
	if err != nil {
		t.Fatal(err)
	}
	if a.W != b.W || a.H != b.H || !bytes.Equal(a.Pix, b.Pix) {
		t.Fatalf("the bucket of the smart-resized size %dx%d does not give Preprocess's pixels", sw, sh)
	}
	if _, ok := p.Fit(4000, 3000, buckets); ok {
		t.Fatalf("a 4000x3000 image fits a default bucket unscaled")
	}
	// a 4:3 photo shrinks into the 4:3 bucket 504x672 (as large as in
	// 672x672, smaller)
	if b, ok := p.FitShrunk(4000, 3000, buckets); !ok || b != (Bucket{W: 672, H: 504}) {
		t.Fatalf("4000x3000 scaled down: %s, %v; want 504x672", b, ok)
	}
	if b, ok := p.FitShrunk(1280, 720, buckets); !ok || b != (Bucket{W: 896, H: 504}) {
		t.Fatalf("1280x720 scaled down: %s, %v; want 504x896", b, ok)
	}
	if b, ok := p.FitShrunk(5000, 100, buckets); ok {
		t.Fatalf("a 50:1 image fits %s", b)
	}
	for _, bad := range []string{"", "224", "224x", "x224", "224x225", "0x224", "-28x28", "9000x28"} {
		if _, err := ParseBuckets(bad, 28); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
	if l, err := ParseBuckets(" 448x336, 224x224,448x336", 28); err != nil || len(l) != 2 || l[0] != (Bucket{W: 336, H: 448}) {
		t.Fatalf("parsed %v, %v", l, err)
	}
}
