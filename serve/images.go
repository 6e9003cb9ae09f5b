package serve

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"

	"github.com/aotlm/aotlm/internal/userfile"

	"github.com/aotlm/aotlm"
)

// ImagePrompts places the images of chat messages in prompts: a
// vision-language model's encoder. A server without one refuses image
// parts.
type ImagePrompts interface {
	// NewImages starts the images of one request.
	NewImages() ImagePrompt
}

// ImagePrompt holds the images of one request.
type ImagePrompt interface {
	// Add decodes and encodes an image file's bytes and returns the
	// placeholder that stands for it in a message's text.
	Add(data []byte) (string, error)
	// Encode encodes the rendered prompt with no special tokens added,
	// each placeholder replaced by its image's tokens and embedding ids.
	Encode(text string) ([]int, error)
	// Embeds holds the rows the embedding ids name.
	Embeds() *aotlm.Embeds
}

// contentPart is one part of a message's content: text or an image.
type contentPart struct {
	Text     string
	ImageURL string
	Image    bool
}

// imageURL reads an image_url part's value: {"url": "..."} (OpenAI's
// form) or a bare string.
func imageURL(raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	var u string
	if len(raw) > 0 && raw[0] == '"' {
		if err := json.Unmarshal(raw, &u); err != nil {
			return "", &fieldError{"content", "image_url: want an object with a url, or a string"}
		}
	} else {
		var obj struct {
			URL *string `json:"url"`
		}
		if err := json.Unmarshal(raw, &obj); err != nil || obj.URL == nil {
			return "", &fieldError{"content", "image_url: want an object with a url, or a string"}
		}
		u = *obj.URL
	}
	if u == "" {
		return "", &fieldError{"content", "image_url: the url is empty"}
	}
	return u, nil
}

// maxImageBytes bounds an image's file size, after base64 decoding.
const maxImageBytes = 64 << 20

// imageBytes loads an image part's file: a data: URL, or a local file
// (a path or file:// URL) when the server allows them.
func (s *Server) imageBytes(u string) ([]byte, error) {
	if rest, ok := cutPrefixFold(u, "data:"); ok {
		return dataURL(rest)
	}
	path := u
	switch {
	case hasPrefixFold(u, "file://"):
		p, err := url.Parse(u)
		if err != nil || (p.Host != "" && p.Host != "localhost") || p.Path == "" {
			return nil, fmt.Errorf("the file URL %q is not file:///absolute/path", short(u))
		}
		path = p.Path
	case hasPrefixFold(u, "http://") || hasPrefixFold(u, "https://"):
		return nil, fmt.Errorf("the server does not fetch images from the web (%s): send the image as a data: URL (data:image/png;base64,...)", short(u))
	case strings.Contains(u, "://"):
		return nil, fmt.Errorf("the image URL %q has a scheme the server does not read: send a data: URL", short(u))
	}
	if !s.opts.AllowLocalImages {
		return nil, fmt.Errorf("local image files (%s) are not allowed on this server: send the image as a data: URL, or start the server allowing local images", short(u))
	}
	b, err := userfile.ReadFile(path, userfile.Image.Named("image file").Limit(maxImageBytes))
	if err != nil {
		return nil, fmt.Errorf("image_url: %w", err)
	}
	return b, nil
}

// dataURL decodes the part of a data: URL after "data:", which must be
// base64 of an image type (or of no stated type).
func dataURL(rest string) ([]byte, error) {
	meta, payload, ok := strings.Cut(rest, ",")
	if !ok {
		return nil, fmt.Errorf("the data: URL has no comma before its data")
	}
	params := strings.Split(meta, ";")
	typ := strings.ToLower(strings.TrimSpace(params[0]))
	if typ != "" && !strings.HasPrefix(typ, "image/") {
		return nil, fmt.Errorf("the data: URL holds %q, not an image type", typ)
	}
	if !strings.EqualFold(strings.TrimSpace(params[len(params)-1]), "base64") {
		return nil, fmt.Errorf("the data: URL is not base64 (want data:image/png;base64,...)")
	}
	if base64.StdEncoding.DecodedLen(len(payload)) > maxImageBytes+3 {
		return nil, fmt.Errorf("the data: URL holds more than %d bytes", maxImageBytes)
	}
	data, err := base64.StdEncoding.DecodeString(payload)
	if err != nil {
		// some clients drop the padding or use the URL alphabet
		var err2 error
		if data, err2 = base64.RawStdEncoding.DecodeString(strings.TrimRight(payload, "=")); err2 != nil {
			if data, err2 = base64.RawURLEncoding.DecodeString(strings.TrimRight(payload, "=")); err2 != nil {
				return nil, fmt.Errorf("the data: URL's base64 is malformed: %v", err)
			}
		}
	}
	if len(data) == 0 {
		return nil, fmt.Errorf("the data: URL holds no data")
	}
	return data, nil
}

// imageContent builds a message's text from its parts, each image
// encoded into imgs (made on the first image) and written as its
// placeholder.
func (s *Server) imageContent(i int, parts []contentPart, imgs *ImagePrompt) (string, *apiError) {
	if s.opts.Images == nil {
		return "", badRequest("messages", "message %d has an image part: the model %s reads no images (it is not a vision-language model)", i, jsonQuote(s.id))
	}
	if *imgs == nil {
		*imgs = s.opts.Images.NewImages()
	}
	var b strings.Builder
	k := 0
	for _, p := range parts {
		if !p.Image {
			b.WriteString(p.Text)
			continue
		}
		data, err := s.imageBytes(p.ImageURL)
		if err != nil {
			return "", badRequest("messages", "message %d, image %d: %v", i, k, err)
		}
		ph, err := (*imgs).Add(data)
		if err != nil {
			return "", badRequest("messages", "message %d, image %d: %v", i, k, err)
		}
		b.WriteString(ph)
		k++
	}
	return b.String(), nil
}

func hasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix)
}

func cutPrefixFold(s, prefix string) (string, bool) {
	if hasPrefixFold(s, prefix) {
		return s[len(prefix):], true
	}
	return s, false
}

// short cuts a URL for an error message.
func short(u string) string {
	if len(u) > 80 {
		return u[:80] + "..."
	}
	return u
}
