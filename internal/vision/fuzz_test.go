package vision

import (
	"bytes"
	"image/gif"
	"image/jpeg"
	"image/png"
	"testing"
)

// FuzzDecode: arbitrary bytes never crash Decode, and what it accepts
// respects the limits.
func FuzzDecode(f *testing.F) {
	var b bytes.Buffer
	if err := png.Encode(&b, testImage(6, 4)); err != nil {
		f.Fatal(err)
	}
	f.Add(b.Bytes())
	for _, enc := range []func(*bytes.Buffer) error{
		func(w *bytes.Buffer) error { return jpeg.Encode(w, testImage(13, 7), nil) },
		func(w *bytes.Buffer) error { return gif.Encode(w, testImage(9, 5), nil) },
	} {
		var e bytes.Buffer
		if err := enc(&e); err != nil {
			f.Fatal(err)
		}
		f.Add(e.Bytes())
	}
	f.Add(webpLossless1x1)
	f.Add(pngHeader(30000, 30000))
	f.Add([]byte("GIF89a\x01\x00\x01\x00"))
	lim := Limits{MaxSide: 256, MaxPixels: 1 << 14, MaxBytes: 1 << 16}
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := Decode(data, lim)
		if err != nil {
			return
		}
		if m.W <= 0 || m.H <= 0 || m.W > lim.MaxSide || m.H > lim.MaxSide || m.W*m.H > lim.MaxPixels || len(m.Pix) != 3*m.W*m.H {
			t.Fatalf("accepted %dx%d with %d values", m.W, m.H, len(m.Pix))
		}
	})
}
