package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/aotlm/aotlm/internal/format/gguf"
	"github.com/aotlm/aotlm/internal/tensor"
)

// visionShape is an InternVL vision tower (InternViT: a class token,
// LayerNorm blocks with q/k/v biases and layer scales) and its projector
// (pixel shuffle by scale, LayerNorm, two linears with GELU between).
type visionShape struct {
	hidden, layers, ffn, heads int
	image, patch, scale        int
	maxTiles                   int
}

// visionMarkers are the text pieces InternVL places around an image's
// rows; the text vocabulary holds them as control tokens.
var visionMarkers = []string{"<img>", "</img>", "<IMG_CONTEXT>"}

// writeVisionPair writes an InternVL model of shape s as the two GGUF files
// llama.cpp's mtmd and aotlm read: dir/text.gguf (the language model, in
// llama.cpp's qwen2 layout, its vocabulary holding the image markers) and
// dir/mmproj.gguf (the vision tower and projector, llama.cpp's clip
// layout).
func writeVisionPair(dir string, s shape, seed uint64) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := write(filepath.Join(dir, "text.gguf"), s, seed); err != nil {
		return err
	}
	return writeGGUF(filepath.Join(dir, "mmproj.gguf"), seed+1, func(g *gen) ([]gguf.WriteTensor, []gguf.KV) {
		g.s = s
		return g.mmprojTensors(), g.mmprojMetadata()
	})
}

// mmprojTensors lays out the vision tower and projector in llama.cpp's
// clip names.
func (g *gen) mmprojTensors() []gguf.WriteTensor {
	v, D := g.s.vision, int64(g.s.hidden)
	H, F, P := int64(v.hidden), int64(v.ffn), int64(v.patch)
	side := int64(v.image / v.patch)
	sh := H * int64(v.scale*v.scale) // a pixel-shuffled row
	ts := []gguf.WriteTensor{
		g.vec("mm.model.mlp.0.weight", sh, 1), g.vec("mm.model.mlp.0.bias", sh, 0),
		g.mat("mm.model.mlp.1.weight", D, sh), g.vec("mm.model.mlp.1.bias", D, 0),
		g.mat("mm.model.mlp.3.weight", D, D), g.vec("mm.model.mlp.3.bias", D, 0),
		g.randVec("v.class_embd", []int64{1, 1, H}),
		{Name: "v.patch_embd.weight", DType: tensor.F16, Shape: []int64{H, 3, P, P}, Stream: g.randF16(int(H * 3 * P * P))},
		g.vec("v.patch_embd.bias", H, 0),
		g.randVec("v.position_embd.weight", []int64{1, side*side + 1, H}),
	}
	for l := 0; l < v.layers; l++ {
		p := fmt.Sprintf("v.blk.%d.", l)
		for _, n := range []string{"attn_q", "attn_k", "attn_v", "attn_out"} {
			ts = append(ts, g.mat(p+n+".weight", H, H), g.vec(p+n+".bias", H, 0))
		}
		ts = append(ts, g.vec(p+"ls1.weight", H, 0.1), g.vec(p+"ls2.weight", H, 0.1),
			g.mat(p+"ffn_up.weight", F, H), g.vec(p+"ffn_up.bias", F, 0),
			g.mat(p+"ffn_down.weight", H, F), g.vec(p+"ffn_down.bias", H, 0),
			g.vec(p+"ln1.weight", H, 1), g.vec(p+"ln1.bias", H, 0),
			g.vec(p+"ln2.weight", H, 1), g.vec(p+"ln2.bias", H, 0))
	}
	return ts
}

// randVec is a random float32 tensor of any shape (the class and
// position embeddings, which llama.cpp's graph joins to float32 rows).
func (g *gen) randVec(name string, shape []int64) gguf.WriteTensor {
	n := int64(1)
	for _, d := range shape {
		n *= d
	}
	return gguf.WriteTensor{Name: name, DType: tensor.F32, Shape: shape, Stream: g.randF32(int(n))}
}

// mmprojMetadata is the clip GGUF's hyper-parameters.
func (g *gen) mmprojMetadata() []gguf.KV {
	v := g.s.vision
	return []gguf.KV{
		{Key: "general.architecture", Value: "clip"},
		{Key: "general.type", Value: "mmproj"},
		{Key: "general.name", Value: "random internvl"},
		{Key: "clip.has_vision_encoder", Value: true},
		{Key: "clip.projector_type", Value: "internvl"},
		{Key: "clip.vision.projection_dim", Value: uint32(g.s.hidden)},
		{Key: "clip.vision.image_size", Value: uint32(v.image)},
		{Key: "clip.vision.patch_size", Value: uint32(v.patch)},
		{Key: "clip.vision.embedding_length", Value: uint32(v.hidden)},
		{Key: "clip.vision.feed_forward_length", Value: uint32(v.ffn)},
		{Key: "clip.vision.block_count", Value: uint32(v.layers)},
		{Key: "clip.vision.attention.head_count", Value: uint32(v.heads)},
		{Key: "clip.vision.image_mean", Value: []float32{0.485, 0.456, 0.406}},
		{Key: "clip.vision.image_std", Value: []float32{0.229, 0.224, 0.225}},
		{Key: "clip.vision.attention.layer_norm_epsilon", Value: float32(1e-6)},
		{Key: "clip.use_gelu", Value: true},
		{Key: "clip.vision.projector.scale_factor", Value: uint32(v.scale)},
		{Key: "clip.vision.preproc_min_tiles", Value: uint32(1)},
		{Key: "clip.vision.preproc_max_tiles", Value: uint32(v.maxTiles)},
	}
}
