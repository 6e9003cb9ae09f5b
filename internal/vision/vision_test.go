package vision

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"image"
	"image/color"
	"image/gif"
	"image/jpeg"
	"image/png"
	"strings"
	"testing"

	"github.com/aotlm/aotlm/internal/testutil"
)

func testImage(w, h int) image.Image {
	m := image.NewNRGBA(image.Rect(0, 0, w, h))
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			m.Set(x, y, color.NRGBA{uint8(x * 7), uint8(y * 13), uint8(x ^ y), 255})
		}
	}
	return m
}

func encode(t *testing.T, kind string, m image.Image) []byte {
	t.Helper()
	var b bytes.Buffer
	var err error
	switch kind {
	case "png":
		err = png.Encode(&b, m)
	case "jpeg":
		err = jpeg.Encode(&b, m, &jpeg.Options{Quality: 95})
	case "gif":
		err = gif.Encode(&b, m, nil)
	}
	if err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestDecodeFormats(t *testing.T) {
	src := testImage(20, 12)
	for _, kind := range []string{"png", "jpeg", "gif"} {
		m, err := Decode(encode(t, kind, src), DefaultLimits)
		if err != nil {
			t.Fatalf("%s: %v", kind, err)
		}
		if m.W != 20 || m.H != 12 {
			t.Fatalf("%s: size %dx%d", kind, m.W, m.H)
		}
		if kind == "png" {
			r, g, b := m.At(5, 3)
			if r != 35 || g != 39 || b != 6 {
				t.Fatalf("png pixel (5,3) = %d %d %d", r, g, b)
			}
		}
	}
}

// A 1x1 lossless WebP (RIFF/WEBP container, VP8L chunk) written byte by
// byte from the WebP container and VP8L bitstream specifications.
func TestDecodeWebP(t *testing.T) {
	// RIFF header, "WEBP", "VP8L" chunk of a 1x1 image
	data := []byte{
		'R', 'I', 'F', 'F', 0x1a, 0, 0, 0, 'W', 'E', 'B', 'P',
		'V', 'P', '8', 'L', 0x0d, 0, 0, 0,
		0x2f, 0, 0, 0, 0x10, 0x07, 0x10, 0x11, 0x11, 0x88, 0x88, 0xfe, 0x07, 0,
	}
	m, err := Decode(data, DefaultLimits)
	if errors.Is(err, ErrNotImage) {
		t.Fatalf("webp not recognised: %v", err)
	}
	if err != nil {
		t.Fatalf("webp: %v", err)
	}
	if m.W != 1 || m.H != 1 {
		t.Fatalf("webp size %dx%d", m.W, m.H)
	}
	r, g, b := m.At(0, 0)
	t.Logf("webp pixel %d %d %d", r, g, b)
	if _, err := Decode(data[:len(data)-4], DefaultLimits); err == nil {
		t.Fatal("truncated webp decoded")
	}
}

// pngHeader returns a PNG signature and IHDR chunk declaring w x h RGB,
// with no image data after it.
func pngHeader(w, h uint32) []byte {
	var b bytes.Buffer
	b.WriteString("\x89PNG\r\n\x1a\n")
	ihdr := make([]byte, 13)
	binary.BigEndian.PutUint32(ihdr[0:], w)
	binary.BigEndian.PutUint32(ihdr[4:], h)
	ihdr[8], ihdr[9] = 8, 2
	var n [4]byte
	binary.BigEndian.PutUint32(n[:], 13)
	b.Write(n[:])
	chunk := append([]byte("IHDR"), ihdr...)
	b.Write(chunk)
	binary.BigEndian.PutUint32(n[:], crc32.ChecksumIEEE(chunk))
	b.Write(n[:])
	return b.Bytes()
}

func TestDecodeBadInput(t *testing.T) {
	good := encode(t, "png", testImage(16, 16))
	cases := []struct {
		name, want string
		data       []byte
	}{
		{"huge declared", "over the 16384-pixel side limit", pngHeader(30000, 30000)},
		{"too many pixels", "over the", pngHeader(16000, 16000)},
		{"truncated", "truncated", good[:len(good)/2]},
		{"not an image", "not an image", []byte("hello, this is text and not a picture at all")},
		{"unsupported format", "not an image", append([]byte("BM"), make([]byte, 60)...)},
		{"empty", "not an image", nil},
	}
	for _, c := range cases {
		var before, after runtimeMem
		before.read()
		_, err := Decode(c.data, DefaultLimits)
		after.read()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one containing %q", c.name, err, c.want)
		}
		if d := after.total - before.total; d > 64<<20 {
			t.Errorf("%s: allocated %d bytes", c.name, d)
		}
	}
	lim := DefaultLimits
	lim.MaxBytes = 10
	if _, err := Decode(good, lim); err == nil || !strings.Contains(err.Error(), "byte limit") {
		t.Errorf("over the byte limit: %v", err)
	}
}

// The fixture's preprocessed PNGs are the u8 pixels llama.cpp's mtmd
// (commit in the fixture README) fed to the encoder; ours are identical. The 128x128 image is
// copied; the 96x64 one is letterboxed (bicubic) for the slice and
// stretched (bilinear) for the overview.
func TestIdefics3MatchesMtmd(t *testing.T) {
	p := Idefics3{Tile: 128, LongestEdge: 128}
	for _, name := range []string{"image_square", "image_wide"} {
		img, err := DecodeFile(testutil.Path(t, "vlm/smolvlm/"+name+".png"), DefaultLimits)
		if err != nil {
			t.Fatal(err)
		}
		out, err := p.Preprocess(img)
		if err != nil {
			t.Fatal(err)
		}
		if out.Rows != 1 || out.Cols != 1 || len(out.Slices) != 1 {
			t.Fatalf("%s: grid %dx%d, %d slices", name, out.Rows, out.Cols, len(out.Slices))
		}
		for _, c := range []struct {
			file string
			got  *RGB
		}{{"slice0", out.Slices[0]}, {"overview", out.Overview}} {
			want, err := DecodeFile(testutil.Path(t, "vlm/smolvlm/preprocessed/"+name+"."+c.file+".png"), DefaultLimits)
			if err != nil {
				t.Fatal(err)
			}
			if want.W != c.got.W || want.H != c.got.H {
				t.Fatalf("%s %s: size %dx%d, want %dx%d", name, c.file, c.got.W, c.got.H, want.W, want.H)
			}
			maxd, n := 0, 0
			for i := range want.Pix {
				d := int(want.Pix[i]) - int(c.got.Pix[i])
				if d < 0 {
					d = -d
				}
				if d > 0 {
					n++
				}
				maxd = max(maxd, d)
			}
			t.Logf("%s %s: %d of %d values differ, max %d", name, c.file, n, len(want.Pix), maxd)
			if maxd != 0 {
				t.Errorf("%s %s: max u8 difference %d, want none", name, c.file, maxd)
			}
		}
	}
}

func TestIdefics3Grid(t *testing.T) {
	p := Idefics3{Tile: 128, LongestEdge: 512}
	out, err := p.Preprocess(NewRGB(1000, 300))
	if err != nil {
		t.Fatal(err)
	}
	// 1000x300 -> 512x153.6 -> 512x256: 4 columns, 2 rows
	if out.Cols != 4 || out.Rows != 2 || len(out.Slices) != 8 || out.Overview.W != 128 {
		t.Fatalf("grid %dx%d, %d slices", out.Rows, out.Cols, len(out.Slices))
	}
	if _, err := (Idefics3{}).Preprocess(NewRGB(4, 4)); err == nil {
		t.Fatal("zero tile accepted")
	}
}

func TestNormalize(t *testing.T) {
	m := NewRGB(2, 1)
	copy(m.Pix, []uint8{0, 255, 51, 255, 0, 102})
	got := Normalize(m, [3]float32{0.5, 0.5, 0.5}, [3]float32{0.5, 0.5, 0.5})
	want := []float32{-1, 1, 1, -1, 0.2*2 - 1, 0.4*2 - 1}
	for i := range want {
		if d := got[i] - want[i]; d > 1e-6 || d < -1e-6 {
			t.Fatalf("normalize[%d] = %v, want %v", i, got[i], want[i])
		}
	}
}

// BenchmarkIdefics3Preprocess: a 640x480 photo-sized image through the
// published SmolVLM settings (tile 512, longest edge 2048: a 2048x1536
// bicubic resize cut into 4x3 tiles, and the overview).
func BenchmarkIdefics3Preprocess(b *testing.B) {
	src := testImage(640, 480)
	img := toRGB(src)
	p := Idefics3{Tile: 512, LongestEdge: 2048}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := p.Preprocess(img); err != nil {
			b.Fatal(err)
		}
	}
}
