package main

import (
	"math"

	"github.com/aotlm/aotlm/internal/testutil/tinymodel"
)

// refLlama is an independent plain-loop Llama forward in float64, written
// from the published definition (RMSNorm, rotary attention with grouped
// keys/values, SwiGLU), sharing no code with the engine. interleaved selects
// the rotary pairing: (2i, 2i+1) as llama2.c, or (i, i+E/2) as HF's
// rotate_half. It returns the logits of every position.
func refLlama(cfg tinymodel.Config, w map[string]tinymodel.Tensor, ids []int, interleaved bool) [][]float64 {
	D, F, V := cfg.HiddenSize, cfg.IntermediateSize, cfg.VocabSize
	H, G := cfg.NumHeads, cfg.NumKVHeads
	E := D / H
	eps, theta := 1e-5, 10000.0
	get := func(name string) []float32 { return w[name].Data }
	matvec := func(m []float32, x []float64, rows int) []float64 {
		cols := len(x)
		out := make([]float64, rows)
		for r := 0; r < rows; r++ {
			for c := 0; c < cols; c++ {
				out[r] += float64(m[r*cols+c]) * x[c]
			}
		}
		return out
	}
	norm := func(x []float64, g []float32) []float64 {
		var ss float64
		for _, v := range x {
			ss += v * v
		}
		s := 1 / math.Sqrt(ss/float64(len(x))+eps)
		out := make([]float64, len(x))
		for i := range x {
			out[i] = x[i] * s * float64(g[i])
		}
		return out
	}
	rot := func(v []float64, pos int) {
		for h := 0; h*E < len(v); h++ {
			for i := 0; i < E/2; i++ {
				a, b := h*E+2*i, h*E+2*i+1
				if !interleaved {
					a, b = h*E+i, h*E+i+E/2
				}
				ang := float64(pos) * math.Pow(theta, -float64(2*i)/float64(E))
				c, s := math.Cos(ang), math.Sin(ang)
				v[a], v[b] = v[a]*c-v[b]*s, v[a]*s+v[b]*c
			}
		}
	}
	L := cfg.NumLayers
	keys := make([][][]float64, L)
	vals := make([][][]float64, L)
	var logits [][]float64
	for pos, id := range ids {
		x := make([]float64, D)
		for i := range x {
			x[i] = float64(get("model.embed_tokens.weight")[id*D+i])
		}
		for l := 0; l < L; l++ {
			p := "model.layers." + itoa(l) + "."
			h := norm(x, get(p+"input_layernorm.weight"))
			q := matvec(get(p+"self_attn.q_proj.weight"), h, H*E)
			k := matvec(get(p+"self_attn.k_proj.weight"), h, G*E)
			v := matvec(get(p+"self_attn.v_proj.weight"), h, G*E)
			rot(q, pos)
			rot(k, pos)
			keys[l] = append(keys[l], k)
			vals[l] = append(vals[l], v)
			att := make([]float64, H*E)
			for hh := 0; hh < H; hh++ {
				g := hh / (H / G)
				sc := make([]float64, pos+1)
				mx := math.Inf(-1)
				for j := 0; j <= pos; j++ {
					for e := 0; e < E; e++ {
						sc[j] += q[hh*E+e] * keys[l][j][g*E+e]
					}
					sc[j] /= math.Sqrt(float64(E))
					mx = math.Max(mx, sc[j])
				}
				var z float64
				for j := range sc {
					sc[j] = math.Exp(sc[j] - mx)
					z += sc[j]
				}
				for j := range sc {
					for e := 0; e < E; e++ {
						att[hh*E+e] += sc[j] / z * vals[l][j][g*E+e]
					}
				}
			}
			o := matvec(get(p+"self_attn.o_proj.weight"), att, D)
			for i := range x {
				x[i] += o[i]
			}
			h = norm(x, get(p+"post_attention_layernorm.weight"))
			gate := matvec(get(p+"mlp.gate_proj.weight"), h, F)
			up := matvec(get(p+"mlp.up_proj.weight"), h, F)
			for i := range gate {
				gate[i] = gate[i] / (1 + math.Exp(-gate[i])) * up[i]
			}
			d := matvec(get(p+"mlp.down_proj.weight"), gate, D)
			for i := range x {
				x[i] += d[i]
			}
		}
		x = norm(x, get("model.norm.weight"))
		head := "lm_head.weight"
		if cfg.TieWordEmbeddings {
			head = "model.embed_tokens.weight"
		}
		logits = append(logits, matvec(get(head), x, V))
	}
	return logits
}

func itoa(i int) string {
	if i < 10 {
		return string(rune('0' + i))
	}
	return itoa(i/10) + string(rune('0'+i%10))
}

func argmax(v []float64) int {
	b := 0
	for i := range v {
		if v[i] > v[b] {
			b = i
		}
	}
	return b
}
