package serve

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/shared"
)

// TestJSONObject: with response_format json_object, sampled replies of a
// story model, cut short by max_tokens or not, always parse as a JSON
// object.
func TestJSONObject(t *testing.T) {
	ts := newTestServer(t, Options{})
	for seed := int64(1); seed <= 6; seed++ {
		p := userChat(int64(8+6*seed), func(p *openai.ChatCompletionNewParams) {
			p.Temperature = openai.Float(1)
			p.Seed = openai.Int(seed)
			if seed%2 == 0 {
				schema := map[string]any{"type": "object", "properties": map[string]any{"name": map[string]any{"type": "string"}}}
				p.ResponseFormat = openai.ChatCompletionNewParamsResponseFormatUnion{OfJSONSchema: &shared.ResponseFormatJSONSchemaParam{
					JSONSchema: shared.ResponseFormatJSONSchemaJSONSchemaParam{Name: "person", Schema: schema}}}
			} else {
				p.ResponseFormat = openai.ChatCompletionNewParamsResponseFormatUnion{OfJSONObject: &shared.ResponseFormatJSONObjectParam{}}
			}
			if seed == 5 {
				p.MaxTokens = param.Opt[int64]{} // omitted: until the context is full
			}
		})
		got, err := ts.client.Chat.Completions.New(context.Background(), p)
		if err != nil {
			t.Fatal(err)
		}
		text := got.Choices[0].Message.Content
		var obj map[string]any
		if err := json.Unmarshal([]byte(text), &obj); err != nil {
			t.Fatalf("seed %d: reply %q (%s, %d tokens) is not a JSON object: %v", seed, text, got.Choices[0].FinishReason, got.Usage.CompletionTokens, err)
		}
		t.Logf("seed %d: %s (%s)", seed, text, got.Choices[0].FinishReason)
	}
}
