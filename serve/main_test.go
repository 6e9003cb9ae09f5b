package serve

import (
	"context"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/aotlm/aotlm"
	"github.com/aotlm/aotlm/internal/compile"
	"github.com/aotlm/aotlm/internal/testutil"
)

const storiesGGUF = "models/stories260K/stories260K.gguf"

// chatML is the chat template the tests give stories260K (which has none).
const chatML = `{% for m in messages %}<|im_start|>{{ m.role }}
{{ m.content }}<|im_end|>
{% endfor %}{% if tools %}<|im_start|>tools
{% for t in tools %}{{ t.function.name }}: {{ t.function.description }}
{% endfor %}<|im_end|>
{% endif %}{% if add_generation_prompt %}<|im_start|>assistant
{% endif %}`

var (
	modelOnce sync.Once
	modelDir  string
	modelPath string
	modelErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if modelDir != "" {
		os.RemoveAll(modelDir)
	}
	if qwen3Dir != "" {
		os.RemoveAll(qwen3Dir)
	}
	os.Exit(code)
}

// openStories compiles stories260K once per test binary (context 256) and
// opens it with the ChatML template.
func openStories(t testing.TB) *aotlm.Model {
	t.Helper()
	src := testutil.Path(t, storiesGGUF)
	modelOnce.Do(func() {
		if modelDir, modelErr = os.MkdirTemp("", "aotlm-server-test"); modelErr != nil {
			return
		}
		modelPath = filepath.Join(modelDir, "stories260K.aot")
		modelErr = compile.CompileFile(src, modelPath, compile.Options{ARLens: []int{8}, Ctx: 256})
	})
	if modelErr != nil {
		t.Fatalf("compile stories260K: %v", modelErr)
	}
	m, err := aotlm.Open(modelPath, aotlm.Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.SetChatTemplate("chatml", chatML); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// testServer is a server on loopback with a client for it.
type testServer struct {
	m      *aotlm.Model
	srv    *Server
	http   *httptest.Server
	client openai.Client
}

func newTestServer(t testing.TB, opts Options) *testServer {
	t.Helper()
	return newTestServerFor(t, openStories(t), opts)
}

func newTestServerFor(t testing.TB, m *aotlm.Model, opts Options) *testServer {
	t.Helper()
	if opts.ModelID == "" {
		opts.ModelID = "stories"
	}
	srv, err := New(m, opts)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		hs.Close()
		srv.Close()
	})
	key := opts.APIKey
	if key == "" {
		key = "unused"
	}
	c := openai.NewClient(option.WithBaseURL(hs.URL+"/v1/"), option.WithAPIKey(key), option.WithMaxRetries(0))
	return &testServer{m: m, srv: srv, http: hs, client: c}
}

// direct generates the reply to a user message on a fresh session,
// without the server: the oracle of the API tests.
func (ts *testServer) direct(t testing.TB, user string, req aotlm.Request) *aotlm.Result {
	t.Helper()
	text, err := ts.m.RenderChat([]aotlm.Message{{Role: "user", Content: user}}, aotlm.RenderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ids, err := ts.m.Encode(text, true)
	if err != nil {
		t.Fatal(err)
	}
	s, err := ts.m.NewSession(0)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	req.IDs, req.StopIDs = ids, ts.m.EndOfTurnIDs()
	res, err := s.Generate(context.Background(), req, nil)
	if err != nil {
		t.Fatal(err)
	}
	return res
}
