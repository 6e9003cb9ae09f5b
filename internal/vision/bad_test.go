package vision

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"runtime"
	"strings"
	"testing"
)

// allocated returns the bytes f allocates on the heap (all goroutines;
// the package's tests do not run in parallel).
func allocated(f func()) uint64 {
	var a, b runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&a)
	f()
	runtime.ReadMemStats(&b)
	return b.TotalAlloc - a.TotalAlloc
}

// webpLossless1x1 is a 1x1 lossless WebP written byte by byte from the
// WebP container and VP8L bitstream specifications.
var webpLossless1x1 = []byte{
	'R', 'I', 'F', 'F', 0x1a, 0, 0, 0, 'W', 'E', 'B', 'P',
	'V', 'P', '8', 'L', 0x0d, 0, 0, 0,
	0x2f, 0, 0, 0, 0x10, 0x07, 0x10, 0x11, 0x11, 0x88, 0x88, 0xfe, 0x07, 0,
}

// withVP8LSize returns the 1x1 WebP with its VP8L header declaring w x h
// (14 bits each), the pixel data left as it is.
func withVP8LSize(w, h int) []byte {
	b := append([]byte(nil), webpLossless1x1...)
	v := uint32(w-1) | uint32(h-1)<<14 | uint32(b[24]>>4&1)<<28
	binary.LittleEndian.PutUint32(b[21:], v|uint32(b[24]&0xe0)<<24)
	return b
}

// webpVP8X returns a RIFF WebP with only a VP8X header declaring a w x h
// canvas.
func webpVP8X(w, h int) []byte {
	var b bytes.Buffer
	b.WriteString("RIFF")
	binary.Write(&b, binary.LittleEndian, uint32(4+8+10))
	b.WriteString("WEBPVP8X")
	binary.Write(&b, binary.LittleEndian, uint32(10))
	b.Write([]byte{0, 0, 0, 0})
	b.Write([]byte{byte(w - 1), byte((w - 1) >> 8), byte((w - 1) >> 16), byte(h - 1), byte((h - 1) >> 8), byte((h - 1) >> 16)})
	return b.Bytes()
}

// webpVP8 returns a RIFF WebP whose lossy VP8 key frame declares w x h
// (14 bits each) with 20 zero bytes of frame data after the header.
func webpVP8(w, h int) []byte {
	frame := []byte{0x10, 0x02, 0x00, 0x9d, 0x01, 0x2a, byte(w), byte(w >> 8 & 0x3f), byte(h), byte(h >> 8 & 0x3f)}
	frame = append(frame, make([]byte, 20)...)
	var b bytes.Buffer
	b.WriteString("RIFF")
	binary.Write(&b, binary.LittleEndian, uint32(4+8+len(frame)))
	b.WriteString("WEBPVP8 ")
	binary.Write(&b, binary.LittleEndian, uint32(len(frame)))
	b.Write(frame)
	return b.Bytes()
}

// withPNGSize rewrites a PNG's IHDR to declare w x h (fixing its CRC).
func withPNGSize(p []byte, w, h uint32) []byte {
	b := append([]byte(nil), p...)
	binary.BigEndian.PutUint32(b[16:], w)
	binary.BigEndian.PutUint32(b[20:], h)
	binary.BigEndian.PutUint32(b[29:], crc32.ChecksumIEEE(b[12:29]))
	return b
}

// withJPEGSize rewrites the first SOF0 segment to declare w x h.
func withJPEGSize(t *testing.T, j []byte, w, h int) []byte {
	b := append([]byte(nil), j...)
	i := bytes.Index(b, []byte{0xff, 0xc0})
	if i < 0 {
		t.Fatal("no SOF0")
	}
	binary.BigEndian.PutUint16(b[i+5:], uint16(h))
	binary.BigEndian.PutUint16(b[i+7:], uint16(w))
	return b
}

// withGIFSize rewrites a GIF's screen and first image descriptor to
// declare w x h.
func withGIFSize(t *testing.T, g []byte, w, h int) []byte {
	b := append([]byte(nil), g...)
	binary.LittleEndian.PutUint16(b[6:], uint16(w))
	binary.LittleEndian.PutUint16(b[8:], uint16(h))
	i := 13
	if b[10]&0x80 != 0 {
		i += 3 << (b[10]&7 + 1)
	}
	for b[i] == 0x21 { // extensions: label, then sub-blocks up to an empty one
		i += 2
		for b[i] != 0 {
			i += int(b[i]) + 1
		}
		i++
	}
	if b[i] != 0x2c {
		t.Fatalf("no image descriptor at %d", i)
	}
	binary.LittleEndian.PutUint16(b[i+5:], uint16(w))
	binary.LittleEndian.PutUint16(b[i+7:], uint16(h))
	return b
}

// Every kind of bad file, in every format, gets an error naming the
// problem and allocates little: the declared size is checked before any
// pixel buffer exists, and a file too short to hold the pixels it
// declares is refused before decoding (without that, the 8000x8000 cases
// below allocate 64-256 MB each, and the 30000x30000 ones gigabytes).
// WebP has no such bound (see TestDecodeWebPSmallFileLargeImage).
func TestDecodeBadImagesAllocateLittle(t *testing.T) {
	src := testImage(64, 64)
	pngData, jpegData, gifData := encode(t, "png", src), encode(t, "jpeg", src), encode(t, "gif", src)
	cases := []struct {
		name, want string
		data       []byte
	}{
		{"png 30000x30000", "over the 16384-pixel side limit", pngHeader(30000, 30000)},
		{"png 30000x30000 with data", "over the 16384-pixel side limit", withPNGSize(pngData, 30000, 30000)},
		{"png 16000x16000", "over the 67108864-pixel limit", withPNGSize(pngData, 16000, 16000)},
		{"png 8000x8000 in a small file", "cannot hold", withPNGSize(pngData, 8000, 8000)},
		{"png truncated", "truncated", pngData[:len(pngData)/2]},
		{"png header only", "truncated", pngData[:33]},
		{"jpeg 30000x30000", "over the 16384-pixel side limit", withJPEGSize(t, jpegData, 30000, 30000)},
		{"jpeg 16000x16000", "over the 67108864-pixel limit", withJPEGSize(t, jpegData, 16000, 16000)},
		{"jpeg 8000x8000 in a small file", "cannot hold", withJPEGSize(t, jpegData, 8000, 8000)},
		{"jpeg truncated", "truncated", jpegData[:len(jpegData)/2]},
		{"jpeg header only", "truncated", jpegData[:20]},
		{"gif 30000x30000", "over the 16384-pixel side limit", withGIFSize(t, gifData, 30000, 30000)},
		{"gif 16000x16000", "over the 67108864-pixel limit", withGIFSize(t, gifData, 16000, 16000)},
		{"gif 8000x8000 in a small file", "cannot hold", withGIFSize(t, gifData, 8000, 8000)},
		{"gif truncated", "truncated", gifData[:len(gifData)/2]},
		{"gif header only", "truncated", gifData[:13]},
		{"webp VP8X 30000x30000", "over the 16384-pixel side limit", webpVP8X(30000, 30000)},
		{"webp VP8L 16384x16384", "over the 67108864-pixel limit", withVP8LSize(16384, 16384)},
		{"webp VP8 16383x16383", "over the 67108864-pixel limit", webpVP8(16383, 16383)},
		{"webp truncated", "truncated", webpLossless1x1[:len(webpLossless1x1)-4]},
		{"not an image", "not an image", []byte("hello, this is text and not a picture at all")},
		{"bmp", "not an image", append([]byte("BM"), make([]byte, 60)...)},
		{"tiff", "not an image", append([]byte("II*\x00"), make([]byte, 60)...)},
		{"empty", "not an image", nil},
	}
	for _, c := range cases {
		var err error
		n := allocated(func() { _, err = Decode(c.data, DefaultLimits) })
		t.Logf("%s: %d bytes allocated: %v", c.name, n, err)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one containing %q", c.name, err, c.want)
		}
		if n > 4<<20 {
			t.Errorf("%s: %d bytes allocated", c.name, n)
		}
	}
}

// A 34-byte lossless WebP can be a valid 1000x1000 image (one color, its
// Huffman codes of zero bits), so a WebP cannot be refused for being
// small; a damaged one that declares a size within the limits is decoded
// up to that size: the allocation stays proportional to the declared
// pixels (here a lossy frame of 2000x2000 with no data: 4:2:0 planes, 1.5
// bytes a pixel), and Limits bound it.
func TestDecodeWebPSmallFileLargeImage(t *testing.T) {
	m, err := Decode(withVP8LSize(1000, 1000), DefaultLimits)
	if err != nil {
		t.Fatalf("34-byte 1000x1000 WebP: %v", err)
	}
	if m.W != 1000 || m.H != 1000 {
		t.Fatalf("size %dx%d", m.W, m.H)
	}
	var derr error
	n := allocated(func() { _, derr = Decode(webpVP8(2000, 2000), DefaultLimits) })
	t.Logf("damaged 2000x2000 VP8: %d bytes allocated: %v", n, derr)
	if derr == nil || !strings.Contains(derr.Error(), "truncated or damaged") {
		t.Errorf("damaged VP8: error %v", derr)
	}
	if n > 2*2000*2000 {
		t.Errorf("damaged 2000x2000 VP8: %d bytes allocated, over 2 a declared pixel", n)
	}
	lim := DefaultLimits
	lim.MaxPixels = 1 << 20
	n = allocated(func() { _, derr = Decode(webpVP8(2000, 2000), lim) })
	if derr == nil || !strings.Contains(derr.Error(), "over the 1048576-pixel limit") || n > 1<<20 {
		t.Errorf("2000x2000 VP8 under a 1-megapixel limit: %v, %d bytes allocated", derr, n)
	}
}
