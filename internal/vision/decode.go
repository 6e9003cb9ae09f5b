// Package vision turns image files into the pixel tensors a vision encoder
// reads: decoding with size limits, and the resizing, slicing and
// normalization a model family's image processor defines.
package vision

import (
	"bytes"
	"errors"
	"fmt"
	"github.com/aotlm/aotlm/internal/userfile"
	"image"
	"image/color"
	"image/draw"
	_ "image/gif" // registers GIF (first frame)
	_ "image/jpeg"
	_ "image/png"
	"io"
	"strings"

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
	data, err := userfile.ReadFile(path, userfile.Image.Limit(lim.MaxBytes))
	if err != nil {
		return nil, err
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
		// (image/gif formats the EOF into its message without wrapping it)
		if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) || strings.HasSuffix(err.Error(), io.ErrUnexpectedEOF.Error()) {
			return nil, fmt.Errorf("%s image header is truncated: %w", kind, err)
		}
		return nil, fmt.Errorf("reading %s image header: %w", kind, err)
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
	if err := checkDensity(kind, data, cfg); err != nil {
		return nil, err
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

// toRGB converts any image to 8-bit RGB, dropping alpha (the color
// channels unpremultiplied). The types Go's decoders return for 8-bit
// files are read directly; others go through an NRGBA copy.
func toRGB(img image.Image) *RGB {
	b := img.Bounds()
	out := NewRGB(b.Dx(), b.Dy())
	switch m := img.(type) {
	case *image.NRGBA:
		for y := 0; y < out.H; y++ {
			row := m.Pix[m.PixOffset(b.Min.X, b.Min.Y+y):]
			o := out.Pix[3*y*out.W:]
			for x := 0; x < out.W; x++ {
				o[3*x], o[3*x+1], o[3*x+2] = row[4*x], row[4*x+1], row[4*x+2]
			}
		}
		return out
	case *image.RGBA:
		for y := 0; y < out.H; y++ {
			row := m.Pix[m.PixOffset(b.Min.X, b.Min.Y+y):]
			o := out.Pix[3*y*out.W:]
			for x := 0; x < out.W; x++ {
				p := row[4*x : 4*x+4]
				if p[3] == 0xff {
					o[3*x], o[3*x+1], o[3*x+2] = p[0], p[1], p[2]
					continue
				}
				c := color.NRGBAModel.Convert(color.RGBA{p[0], p[1], p[2], p[3]}).(color.NRGBA)
				o[3*x], o[3*x+1], o[3*x+2] = c.R, c.G, c.B
			}
		}
		return out
	case *image.Gray:
		for y := 0; y < out.H; y++ {
			row := m.Pix[m.PixOffset(b.Min.X, b.Min.Y+y):]
			o := out.Pix[3*y*out.W:]
			for x := 0; x < out.W; x++ {
				o[3*x], o[3*x+1], o[3*x+2] = row[x], row[x], row[x]
			}
		}
		return out
	case *image.Paletted:
		var pal [256][3]uint8
		for i, c := range m.Palette {
			n := color.NRGBAModel.Convert(c).(color.NRGBA)
			pal[i] = [3]uint8{n.R, n.G, n.B}
		}
		for y := 0; y < out.H; y++ {
			row := m.Pix[m.PixOffset(b.Min.X, b.Min.Y+y):]
			o := out.Pix[3*y*out.W:]
			for x := 0; x < out.W; x++ {
				p := pal[row[x]]
				o[3*x], o[3*x+1], o[3*x+2] = p[0], p[1], p[2]
			}
		}
		return out
	}
	rgba := image.NewNRGBA(image.Rect(0, 0, b.Dx(), b.Dy()))
	draw.Draw(rgba, rgba.Rect, img, b.Min, draw.Src)
	for y := 0; y < out.H; y++ {
		row := rgba.Pix[y*rgba.Stride:]
		for x := 0; x < out.W; x++ {
			copy(out.Pix[3*(y*out.W+x):3*(y*out.W+x)+3], row[4*x:4*x+3])
		}
	}
	return out
}

// Most pixels one byte of a complete file can describe, per format: PNG's
// deflate compresses at most 1032:1 (checked on the unfiltered rows, so
// this bound is in bytes of rows); a GIF's LZW code of at most 12 bits
// stands for at most 4096 pixels; every 8x8 block of a complete JPEG
// costs at least one bit (its DC code), so at most 512 pixels a byte, with
// a margin of 8. A lossless WebP can describe a huge image in a few bytes
// (34 bytes hold a valid 4000x4000 one), and a lossy one codes its
// macroblocks arithmetically, so WebP has no such bound.
const (
	deflateMaxRatio      = 1032
	gifMaxPixelsPerByte  = 4096
	jpegMaxPixelsPerByte = 4096
)

// checkDensity refuses a file too short to hold the pixels it declares
// (a truncated file, or a header made up to declare a large image), so
// that decoding never allocates a large pixel buffer for a small file.
func checkDensity(kind string, data []byte, cfg image.Config) error {
	px := int64(cfg.Width) * int64(cfg.Height)
	var need int64 // bytes a complete file needs at the least
	switch kind {
	case "png":
		// IHDR: bit depth and color type after the 8-byte signature, the
		// chunk length and type, width and height
		if len(data) < 26 {
			return nil
		}
		channels := map[byte]int64{0: 1, 2: 3, 3: 1, 4: 2, 6: 4}[data[25]]
		if channels == 0 {
			return nil
		}
		rowBytes := 1 + (int64(cfg.Width)*channels*int64(data[24])+7)/8
		need = int64(cfg.Height) * rowBytes / deflateMaxRatio
	case "gif":
		w, h, ok := gifFirstFrameSize(data)
		if !ok {
			return nil
		}
		px = int64(w) * int64(h)
		need = px / gifMaxPixelsPerByte
	case "jpeg":
		need = px / jpegMaxPixelsPerByte
	default:
		return nil
	}
	if int64(len(data)) < need {
		return fmt.Errorf("%s image declares %dx%d, which its %d bytes cannot hold (a complete file needs at least %d): truncated or damaged", kind, cfg.Width, cfg.Height, len(data), need)
	}
	return nil
}

// gifFirstFrameSize reads the size of a GIF's first image descriptor,
// skipping the global color table and any extension blocks before it.
func gifFirstFrameSize(b []byte) (w, h int, ok bool) {
	i := 13
	if len(b) < i {
		return 0, 0, false
	}
	if b[10]&0x80 != 0 {
		i += 3 << (b[10]&7 + 1)
	}
	for i+1 < len(b) && b[i] == 0x21 { // extension: introducer, label, sub-blocks
		i += 2
		for i < len(b) && b[i] != 0 {
			i += int(b[i]) + 1
		}
		i++
	}
	if i+9 > len(b) || b[i] != 0x2c {
		return 0, 0, false
	}
	return int(b[i+5]) | int(b[i+6])<<8, int(b[i+7]) | int(b[i+8])<<8, true
}
