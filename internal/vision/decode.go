// Package vision turns image files into the pixel tensors a vision encoder
// reads: decoding with size limits, and the resizing, slicing and
// normalization a model family's image processor defines.
package vision

import (
	"bytes"
	"errors"
	"fmt"
	"image"
	"image/draw"
	_ "image/gif" // registers GIF (first frame)
	_ "image/jpeg"
	_ "image/png"
	"io"
	"os"

	_ "golang.org/x/image/webp" // registers WebP
)

// Limits bound what Decode accepts.
type Limits struct {
	// MaxSide is the largest width or height accepted.
	MaxSide int
	// MaxPixels is the largest width*height accepted.
	MaxPixels int
	// MaxBytes is the largest encoded file accepted.
	MaxBytes int64
}

// DefaultLimits accept photos of up to 64 megapixels, 16384 pixels a side,
// from files of up to 64 MiB.
var DefaultLimits = Limits{MaxSide: 16384, MaxPixels: 64 << 20, MaxBytes: 64 << 20}

// ErrNotImage is returned for data that is not an image of a known format.
var ErrNotImage = errors.New("not an image in a supported format (JPEG, PNG, GIF, WebP)")

// RGB is an 8-bit RGB image, row-major, 3 bytes a pixel.
type RGB struct {
	W, H int
	Pix  []uint8
}

// At returns the channels of pixel (x, y).
func (m *RGB) At(x, y int) (r, g, b uint8) {
	i := 3 * (y*m.W + x)
	return m.Pix[i], m.Pix[i+1], m.Pix[i+2]
}

// NewRGB returns a black w x h image.
func NewRGB(w, h int) *RGB { return &RGB{W: w, H: h, Pix: make([]uint8, 3*w*h)} }

// DecodeFile reads and decodes an image file within limits.
func DecodeFile(path string, lim Limits) (*RGB, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if lim.MaxBytes > 0 && st.Size() > lim.MaxBytes {
		return nil, fmt.Errorf("%s: file of %d bytes is over the %d-byte limit for images", path, st.Size(), lim.MaxBytes)
	}
	data, err := io.ReadAll(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	m, err := Decode(data, lim)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return m, nil
}

// Decode decodes a JPEG, PNG, GIF (first frame) or WebP image to RGB; an
// alpha channel is dropped (the color channels kept unpremultiplied, as
// llama.cpp's image loader does). The declared size is checked
// against lim before any pixel is decoded, so a small file that claims a
// huge image is refused without allocating it.
func Decode(data []byte, lim Limits) (*RGB, error) {
	if lim.MaxBytes > 0 && int64(len(data)) > lim.MaxBytes {
		return nil, fmt.Errorf("image of %d bytes is over the %d-byte limit", len(data), lim.MaxBytes)
	}
	cfg, kind, err := image.DecodeConfig(bytes.NewReader(data))
	if err != nil {
		if errors.Is(err, image.ErrFormat) {
			return nil, ErrNotImage
		}
		return nil, fmt.Errorf("reading image header: %w", err)
	}
	if cfg.Width <= 0 || cfg.Height <= 0 {
		return nil, fmt.Errorf("%s image declares an empty size %dx%d", kind, cfg.Width, cfg.Height)
	}
	if lim.MaxSide > 0 && (cfg.Width > lim.MaxSide || cfg.Height > lim.MaxSide) {
		return nil, fmt.Errorf("%s image of %dx%d is over the %d-pixel side limit", kind, cfg.Width, cfg.Height, lim.MaxSide)
	}
	if lim.MaxPixels > 0 && int64(cfg.Width)*int64(cfg.Height) > int64(lim.MaxPixels) {
		return nil, fmt.Errorf("%s image of %dx%d is over the %d-pixel limit", kind, cfg.Width, cfg.Height, lim.MaxPixels)
	}
	img, _, err := image.Decode(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("decoding %s image (truncated or damaged?): %w", kind, err)
	}
	// a GIF's first frame may be smaller than its declared screen
	b := img.Bounds()
	if b.Dx() <= 0 || b.Dy() <= 0 || b.Dx() > cfg.Width || b.Dy() > cfg.Height {
		return nil, fmt.Errorf("%s image decodes to %dx%d but declares %dx%d", kind, b.Dx(), b.Dy(), cfg.Width, cfg.Height)
	}
	if y, ok := img.(*image.YCbCr); ok && kind == "jpeg" && b.Min == (image.Point{}) {
		return jpegToRGB(y), nil
	}
	return toRGB(img), nil
}

// toRGB converts any image to 8-bit RGB, dropping alpha.
func toRGB(img image.Image) *RGB {
	b := img.Bounds()
	rgba, ok := img.(*image.NRGBA)
	if !ok || rgba.Rect.Min != (image.Point{}) {
		rgba = image.NewNRGBA(image.Rect(0, 0, b.Dx(), b.Dy()))
		draw.Draw(rgba, rgba.Rect, img, b.Min, draw.Src)
	}
	out := NewRGB(b.Dx(), b.Dy())
	for y := 0; y < out.H; y++ {
		row := rgba.Pix[y*rgba.Stride:]
		for x := 0; x < out.W; x++ {
			copy(out.Pix[3*(y*out.W+x):3*(y*out.W+x)+3], row[4*x:4*x+3])
		}
	}
	return out
}
