package main

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"

	"github.com/aotlm/aotlm/internal/format/safetensors"
	"github.com/aotlm/aotlm/internal/tensor"
)

// writeCodegen writes a CodeGen model of shape s as a Hugging Face folder
// dir: config.json (with the head_dim key CodeGen2's configs carry) and
// model.safetensors in binary16 (LayerNorm gains 1, biases 0), each tensor
// generated and written in turn.
func writeCodegen(dir string, s shape, seed uint64) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	cfg := map[string]any{
		"architectures": []string{"CodeGenForCausalLM"}, "model_type": "codegen", "torch_dtype": "float16",
		"n_embd": s.hidden, "n_layer": s.layers, "n_head": s.heads, "head_dim": s.headDm, "rotary_dim": s.rotary, "n_inner": s.ffn,
		"n_positions": 2048, "n_ctx": 2048, "vocab_size": s.vocab, "activation_function": "gelu_new",
		"layer_norm_epsilon": 1e-5, "tie_word_embeddings": false, "bos_token_id": 1, "eos_token_id": 2,
	}
	if s.ffn == 4*s.hidden {
		cfg["n_inner"] = nil // as CodeGen's configs write it
	}
	b, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return err
	}
	if err := writeFile(filepath.Join(dir, "config.json"), b); err != nil {
		return err
	}
	H, F, V := int64(s.hidden), int64(s.ffn), int64(s.vocab)
	// fill: 'n' N(0, 0.02), '1' ones, '0' zeros
	type spec struct {
		t    safetensors.Tensor
		fill byte
	}
	vec := func(name string, n int64, fill byte) spec {
		return spec{safetensors.Tensor{Name: name, DType: tensor.F16, Shape: []int64{n}}, fill}
	}
	mat := func(name string, rows, cols int64) spec {
		return spec{safetensors.Tensor{Name: name, DType: tensor.F16, Shape: []int64{rows, cols}}, 'n'}
	}
	specs := []spec{mat("transformer.wte.weight", V, H), vec("transformer.ln_f.weight", H, '1'), vec("transformer.ln_f.bias", H, '0'),
		mat("lm_head.weight", V, H), vec("lm_head.bias", V, '0')}
	for l := 0; l < s.layers; l++ {
		p := fmt.Sprintf("transformer.h.%d.", l)
		specs = append(specs, vec(p+"ln_1.weight", H, '1'), vec(p+"ln_1.bias", H, '0'),
			mat(p+"attn.qkv_proj.weight", 3*H, H), mat(p+"attn.out_proj.weight", H, H),
			mat(p+"mlp.fc_in.weight", F, H), vec(p+"mlp.fc_in.bias", F, '0'),
			mat(p+"mlp.fc_out.weight", H, F), vec(p+"mlp.fc_out.bias", H, '0'))
	}
	decl := make([]safetensors.Tensor, len(specs))
	for i, sp := range specs {
		decl[i] = sp.t
	}
	w, err := safetensors.Create(filepath.Join(dir, "model.safetensors"), decl, map[string]string{"format": "pt"})
	if err != nil {
		return err
	}
	r := rand.New(rand.NewPCG(seed, 7))
	for _, sp := range specs {
		n := int64(1)
		for _, d := range sp.t.Shape {
			n *= d
		}
		raw := make([]byte, 2*n)
		for i := range n {
			var v float32
			switch sp.fill {
			case 'n':
				v = float32(r.NormFloat64() * 0.02)
			case '1':
				v = 1
			}
			binary.LittleEndian.PutUint16(raw[2*i:], tensor.F32ToF16(v))
		}
		sp.t.Raw = raw
		if err := w.WriteTensor(sp.t); err != nil {
			w.Abort()
			return err
		}
	}
	return w.Commit()
}

// writeFile writes b to path through a temporary file in its folder.
func writeFile(path string, b []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".shapegen-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
