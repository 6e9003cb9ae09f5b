package serve

import (
	"encoding/base64"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/aotlm/aotlm"
)

// fakeImages records the image files a request's parts load and writes
// each as a placeholder that Encode drops (a stand-in for a
// vision-language model's encoder).
type fakeImages struct{ got *[][]byte }

func (f fakeImages) NewImages() ImagePrompt { return &fakePrompt{got: f.got} }

type fakePrompt struct {
	got *[][]byte
}

func (p *fakePrompt) Add(data []byte) (string, error) {
	*p.got = append(*p.got, data)
	return "<img" + strconv.Itoa(len(*p.got)) + ">", nil
}

func (p *fakePrompt) Encode(text string) ([]int, error) {
	for strings.Contains(text, "<img") {
		i := strings.Index(text, "<img")
		j := strings.Index(text[i:], ">")
		text = text[:i] + text[i+j+1:]
	}
	return nil, errNoEncode(text)
}

func (p *fakePrompt) Embeds() *aotlm.Embeds { return nil }

// errNoEncode carries the text Encode saw, so the test can read it.
type errNoEncode string

func (e errNoEncode) Error() string { return "encoded text: " + string(e) }

// TestImageParts: image_url parts reach the server's image encoder with
// the bytes of their data: URL, or of a file when local files are
// allowed; refusals name the problem; without an encoder image parts are
// refused.
func TestImageParts(t *testing.T) {
	var got [][]byte
	file := filepath.Join(t.TempDir(), "x.png")
	if err := os.WriteFile(file, []byte("file bytes"), 0o644); err != nil {
		t.Fatal(err)
	}
	// a named pipe without a writer, which a plain open blocks on, and a
	// sparse file one byte over the limit
	fifo := filepath.Join(t.TempDir(), "p.png")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(t.TempDir(), "big.png")
	if f, err := os.Create(big); err != nil || f.Truncate(maxImageBytes+1) != nil || f.Close() != nil {
		t.Fatal("sparse file", err)
	}
	body := func(u string) string {
		return `{"messages": [{"role": "user", "content": [{"type": "text", "text": "A"}, {"type": "image_url", "image_url": {"url": ` +
			strconv.Quote(u) + `}}, {"type": "text", "text": "B"}]}], "max_tokens": 2}`
	}
	data := "data:image/png;base64," + base64.StdEncoding.EncodeToString([]byte("png bytes"))
	for _, allow := range []bool{false, true} {
		ts := newTestServer(t, Options{Images: fakeImages{&got}, AllowLocalImages: allow})
		got = nil
		cases := []struct{ url, says string }{
			{data, "encoded text: "},
			{"data:image/png;base64,cG5nIGJ5dGVz", "encoded text: "}, // unpadded
			{"data:image/png;base64,@@@", "base64 is malformed"},
			{"data:image/png;base64", "no comma"},
			{"data:text/html;base64,cG5n", "not an image type"},
			{"data:image/png;utf8,<svg>", "not base64"},
			{"data:image/png;base64,", "no data"},
			{"https://example.com/x.png", "does not fetch"},
			{"ftp://example.com/x.png", "scheme"},
			{"file://remote-host/x.png", "file:///absolute/path"},
		}
		if allow {
			cases = append(cases, struct{ url, says string }{file, "encoded text: "},
				struct{ url, says string }{"file://" + file, "encoded text: "},
				struct{ url, says string }{file + ".missing", "no such file"},
				struct{ url, says string }{"/dev/zero", "character device"},
				struct{ url, says string }{"file:///dev/urandom", "character device"},
				struct{ url, says string }{fifo, "named pipe"},
				struct{ url, says string }{filepath.Dir(file), "folder"},
				struct{ url, says string }{big, "exceeds the limit"})
		} else {
			cases = append(cases, struct{ url, says string }{file, "not allowed on this server"},
				struct{ url, says string }{"file://" + file, "not allowed on this server"})
		}
		for _, c := range cases {
			status, msg, _ := post(t, ts, "/v1/chat/completions", body(c.url), nil)
			if status != 400 || !strings.Contains(msg, c.says) {
				t.Errorf("allow %v, %.40s: %d %q, want 400 saying %q", allow, c.url, status, msg, c.says)
			}
			if strings.HasPrefix(c.says, "encoded text") && !strings.Contains(msg, "A") {
				t.Errorf("%.40s: the parts' text was lost: %q", c.url, msg)
			}
		}
		want := []string{"png bytes", "png bytes"}
		if allow {
			want = append(want, "file bytes", "file bytes")
		}
		if len(got) != len(want) {
			t.Fatalf("allow %v: the encoder got %d images, want %d", allow, len(got), len(want))
		}
		for i := range want {
			if string(got[i]) != want[i] {
				t.Errorf("allow %v: image %d is %q, want %q", allow, i, got[i], want[i])
			}
		}
	}
	ts := newTestServer(t, Options{})
	if status, msg, _ := post(t, ts, "/v1/chat/completions", body(data), nil); status != 400 || !strings.Contains(msg, "reads no images") {
		t.Errorf("a model without vision: %d %q", status, msg)
	}
}
