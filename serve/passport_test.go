package serve

import (
	"encoding/json"
	"net/http"
	"path/filepath"
	"testing"

	"github.com/aotlm/aotlm"
	"github.com/aotlm/aotlm/internal/compile"
	"github.com/aotlm/aotlm/internal/passport"
	"github.com/aotlm/aotlm/internal/qmodel"
	"github.com/aotlm/aotlm/internal/quant"
	"github.com/aotlm/aotlm/internal/recipe"
	"github.com/aotlm/aotlm/internal/testutil"
)

// TestModelsPassport: /v1/models lists the artifact's passport under
// meta.passport, and a model without one lists none.
func TestModelsPassport(t *testing.T) {
	src := testutil.Path(t, storiesGGUF)
	dir := t.TempDir()
	q := filepath.Join(dir, "q")
	r, err := quant.Preset("lpbq4-h6")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := recipe.Quantize(src, q, recipe.QuantizeOptions{Recipe: r}); err != nil {
		t.Fatal(err)
	}
	want := passport.Passport{Recipe: "lpbq4-h6", Text: "t.txt", TextSHA256: "00ff", Ctx: 256, Chunks: 1, Tokens: 127,
		Phases: []passport.Phase{{Name: "float", PPL: 6.25, SameTop1: 1}, {Name: "artifact", PPL: 7.5, KL: 0.25, SameTop1: 0.75}}}
	raw, err := json.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	if err := qmodel.SetPassport(q, raw); err != nil {
		t.Fatal(err)
	}
	aot := filepath.Join(dir, "q.aot")
	if err := compile.CompileFile(q, aot, compile.Options{ARLens: []int{8}, Ctx: 256}); err != nil {
		t.Fatal(err)
	}
	m, err := aotlm.Open(aot, aotlm.Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	get := func(ts *testServer) *passport.Passport {
		resp, body := send(t, ts, http.MethodGet, "/v1/models", "", nil)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("status %d: %s", resp.StatusCode, body)
		}
		var list struct {
			Data []struct {
				Meta struct {
					Passport json.RawMessage `json:"passport"`
				} `json:"meta"`
			} `json:"data"`
		}
		if err := json.Unmarshal([]byte(body), &list); err != nil || len(list.Data) != 1 {
			t.Fatalf("%v: %s", err, body)
		}
		p, err := passport.Parse(list.Data[0].Meta.Passport)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	p := get(newTestServerFor(t, m, Options{}))
	if p == nil || p.Recipe != want.Recipe || len(p.Phases) != 2 || p.Phases[1] != want.Phases[1] {
		t.Errorf("passport %+v, want %+v", p, want)
	}
	if p := get(newTestServer(t, Options{})); p != nil {
		t.Errorf("a model without a passport lists %+v", p)
	}
}
