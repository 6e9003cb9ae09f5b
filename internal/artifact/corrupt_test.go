package artifact

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestTruncated cuts the file at every byte and checks that every prefix
// is refused as truncated, naming the header or the file.
func TestTruncated(t *testing.T) {
	_, b := sampleFile(t)
	for n := 0; n < len(b); n++ {
		_, err := openBytes(b[:n], false)
		section := "file"
		if n < HeaderSize {
			section = "header"
		}
		wantFormatError(t, err, section, "truncated")
	}
}

func TestFutureVersion(t *testing.T) {
	path, b := sampleFile(t)
	for _, v := range []uint32{2, 7, 1 << 31} {
		c := slices.Clone(b)
		binary.LittleEndian.PutUint32(c[8:], v)
		resealHeader(c)
		if err := os.WriteFile(path, c, 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := Open(path, OpenOptions{})
		var ve *VersionError
		if !errors.As(err, &ve) || ve.Version != v || ve.Supported != Version {
			t.Fatalf("version %d: got %v, want a VersionError", v, err)
		}
		want := "artifact format version " + itoa(v) + " is newer than this aotlm supports (1); rebuild it or upgrade aotlm"
		if got := err.Error(); !bytes.HasSuffix([]byte(got), []byte(want)) {
			t.Errorf("message %q, want it to end with %q", got, want)
		}
	}
	// A version newer than supported is reported even on a file too short
	// for the rest of a header, and version 0 is invalid.
	if _, err := openBytes([]byte("AOTLM\x00\r\n\x09\x00\x00\x00"), false); !errors.As(err, new(*VersionError)) {
		t.Errorf("12-byte version-9 file: %v", err)
	}
	c := slices.Clone(b)
	binary.LittleEndian.PutUint32(c[8:], 0)
	_, err := openBytes(c, false)
	wantFormatError(t, err, "header", "version 0")
}

// itoa formats v in decimal.
func itoa(v uint32) string {
	if v < 10 {
		return string(rune('0' + v))
	}
	return itoa(v/10) + string(rune('0'+v%10))
}

// sectionOf returns the name a flipped byte at offset i must be reported
// under.
func sectionOf(b []byte, i int64) string {
	if i < HeaderSize {
		return "header"
	}
	toff := int64(binary.LittleEndian.Uint64(b[24:]))
	if i >= toff {
		return "section table"
	}
	for _, e := range rawTable(b) {
		if i >= e.off && i < e.off+e.size {
			return e.name
		}
	}
	return "padding"
}

// TestFlippedByte flips every byte of the file in turn. Outside the weights
// Open refuses the file naming the section; inside them Open succeeds and
// Verify (or Open with Verify) refuses it naming the weights.
func TestFlippedByte(t *testing.T) {
	_, b := sampleFile(t)
	counts := map[string]int{}
	for i := range int64(len(b)) {
		c := slices.Clone(b)
		c[i] ^= 0x5a
		want := sectionOf(b, i)
		counts[want]++
		a, err := openBytes(c, false)
		switch {
		case want == WeightsName:
			if err != nil {
				t.Fatalf("byte %d (weights): Open without Verify: %v", i, err)
			}
			wantFormatError(t, a.Verify(), WeightsName, "checksum mismatch")
			_, err = openBytes(c, true)
			wantFormatError(t, err, WeightsName, "checksum mismatch")
		case i >= 8 && i < 12:
			if !errors.As(err, new(*VersionError)) {
				t.Fatalf("byte %d (version): %v", i, err)
			}
		case want == "padding":
			wantFormatError(t, err, "section table", "padding", "not zero")
		case i < int64(len(Magic)):
			wantFormatError(t, err, "header", "bad magic")
		default:
			wantFormatError(t, err, want)
		}
	}
	for _, s := range []string{"header", "section table", "manifest", "tensor-index", "plan/ar32", "plan/ar1", "tokenizer/tokenizer.json", "weights", "padding"} {
		if counts[s] == 0 {
			t.Errorf("no byte of %q was flipped", s)
		}
	}
}

// TestCorruptNamed checks the messages for a flipped byte in the named
// small sections.
func TestCorruptNamed(t *testing.T) {
	_, b := sampleFile(t)
	for _, name := range []string{ManifestName, TensorIndexName, "plan/ar32", "plan/ar1", "tokenizer/tokenizer.json"} {
		e := entry(t, b, name)
		c := slices.Clone(b)
		c[e.off+e.size/2] ^= 1
		_, err := openBytes(c, false)
		wantFormatError(t, err, name, name, "checksum mismatch")
	}
	c := slices.Clone(b)
	c[30] ^= 1
	_, err := openBytes(c, false)
	wantFormatError(t, err, "header", "checksum mismatch")
	c = slices.Clone(b)
	c[entry(t, b, "plan/ar1").at+40] ^= 1
	_, err = openBytes(c, false)
	wantFormatError(t, err, "section table", "checksum mismatch")
}

// TestCorruptWeightsOnDisk corrupts a weight byte of a mapped file: a
// normal Open succeeds (it does not read the weights), Verify refuses.
func TestCorruptWeightsOnDisk(t *testing.T) {
	path, b := sampleFile(t)
	w := entry(t, b, WeightsName)
	b[w.off+w.size-1] ^= 0x80
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	a, err := Open(path, OpenOptions{})
	if err != nil {
		t.Fatalf("Open without Verify: %v", err)
	}
	defer a.Close()
	wantFormatError(t, a.Verify(), WeightsName, "weights", "checksum mismatch")
	_, err = Open(path, OpenOptions{Verify: true})
	wantFormatError(t, err, WeightsName, "weights", "checksum mismatch")
	if want := filepath.Base(path); !bytes.Contains([]byte(err.Error()), []byte(want)) {
		t.Errorf("error %q does not name the file", err)
	}
}
