package arch

import (
	"testing"

	"github.com/aotlm/aotlm/internal/graph"
)

// TestPoolingTypeGGUF: a GGUF's pooling_type (llama.cpp's enum) names the
// pooling of an embedding model or a reranker; none, or an absent key,
// leaves a generative model.
func TestPoolingTypeGGUF(t *testing.T) {
	for v, want := range map[any]string{int64(0): "", int64(1): "mean", int64(2): "cls", int64(3): "last", int64(4): "rank", nil: ""} {
		m := map[string]any{"qwen3.embedding_length": int64(64), "qwen3.feed_forward_length": int64(128),
			"qwen3.block_count": int64(2), "qwen3.attention.head_count": int64(4)}
		if v != nil {
			m["qwen3.pooling_type"] = v
		}
		c, err := decoderConfigGGUF(m, "qwen3", "qwen3", graph.RopeHalf)
		if err != nil {
			t.Fatal(err)
		}
		if c.Pooling != want {
			t.Errorf("pooling_type %v: %q, want %q", v, c.Pooling, want)
		}
	}
}
