// Package onnxexport writes a model as two static-shape ONNX graphs for
// ONNX Runtime (its QNN execution provider on a Snapdragon NPU, its CPU
// provider anywhere): an AR-N prefill graph and an AR-1 decode graph,
// sharing one external weights file, with the KV cache as inputs and
// outputs of a fixed context. Weights and activations are float, or in
// QDQ form (QuantizeLinear/DequantizeLinear pairs) with the LPBQ and W8
// weights of a quantized folder, 16-bit activations and an 8-bit cache.
// docs/npu.md is the runtime contract.
package onnxexport

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/aotlm/aotlm/internal/arch"
	"github.com/aotlm/aotlm/internal/graph"
	"github.com/aotlm/aotlm/internal/onnx"
)

// The files an export writes into its folder.
const (
	PrefillFile = "prefill.onnx"
	DecodeFile  = "decode.onnx"
	WeightsFile = "model.onnx.data"
	ConfigFile  = "genai_config.json"
)

// Opset is the default-domain opset the graphs declare; IRVersion the
// ONNX IR version that opset needs.
const (
	Opset     = 21
	IRVersion = 10
)

// Options configures Export.
type Options struct {
	// ARLen is N, the tokens of one prefill pass (at least 2).
	ARLen int
	// Context is the cache size in positions.
	Context int
	// Quant, when set, exports the weights and activations in QDQ form;
	// nil exports float weights and activations.
	Quant *QDQ
	// Producer names the writer in the models' producer fields.
	Producer string
}

// Export writes m's prefill and decode graphs, their shared weights file
// and a genai_config.json into dir (created if needed). Every file is
// written to a temporary name first and renamed.
func Export(dir string, m *arch.Model, opts Options) error {
	if opts.ARLen < 2 {
		return fmt.Errorf("onnx export: AR length %d: want at least 2 (the decode graph is AR-1)", opts.ARLen)
	}
	if opts.Context < opts.ARLen {
		return fmt.Errorf("onnx export: context %d is shorter than the AR length %d", opts.Context, opts.ARLen)
	}
	g, err := arch.Build(&m.Config, arch.BuildOptions{AllLogits: true})
	if err != nil {
		return fmt.Errorf("onnx export: %w", err)
	}
	if g.Layers == 0 {
		return errors.New("onnx export: the model has no attention layer (recurrent families are not exported)")
	}
	var q quantizer = floatQuant{}
	if opts.Quant != nil {
		qq, err := newQDQ(opts.Quant, g, m.Weights)
		if err != nil {
			return err
		}
		q = qq
	}
	st := newStore(WeightsFile)
	graphs := map[string]*onnx.Graph{}
	for _, ar := range []struct {
		file string
		rows int
	}{{PrefillFile, opts.ARLen}, {DecodeFile, 1}} {
		og, err := translate(fmt.Sprintf("ar%d", ar.rows), g, m.Weights, st, q, ar.rows, opts.Context)
		if err != nil {
			return err
		}
		graphs[ar.file] = og
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("onnx export: %w", err)
	}
	if err := writeFile(filepath.Join(dir, WeightsFile), st.data); err != nil {
		return err
	}
	for file, og := range graphs {
		mod := &onnx.Model{IRVersion: IRVersion, Opset: Opset, Producer: opts.Producer, Graph: *og,
			Metadata: map[string]string{"aotlm.family": m.Config.Family}}
		if err := writeFile(filepath.Join(dir, file), mod.Marshal()); err != nil {
			return err
		}
	}
	cfg, err := json.MarshalIndent(genaiConfig(&m.Config, g, opts), "", "  ")
	if err != nil {
		return fmt.Errorf("onnx export: %w", err)
	}
	return writeFile(filepath.Join(dir, ConfigFile), append(cfg, '\n'))
}

// writeFile writes b to a temporary file beside path and renames it.
func writeFile(path string, b []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("onnx export: %w", err)
	}
	_, err = tmp.Write(b)
	if err == nil {
		err = tmp.Chmod(0o644)
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("onnx export: writing %s: %w", path, err)
	}
	return nil
}

// quantizer decides how linear weights, linear inputs and cache rows
// appear in a graph: float, or in QDQ form.
type quantizer interface {
	// linear returns the [K, N] weight of a linear node.
	linear(p *pass, n *graph.Node) (string, error)
	// embed returns the rows of embedding node n's table that input_ids
	// pick, [1, N, D].
	embed(p *pass, n *graph.Node) (string, error)
	// activation returns the input x of linear node n as the linear reads
	// it; output its product y (before the bias) as the graph keeps it.
	activation(p *pass, n *graph.Node, x string) string
	output(p *pass, n *graph.Node, y string) string
	// cacheType is the element type of the cache inputs and outputs;
	// cacheIn turns a cache tensor of that type into float, cacheOut a
	// float one into that type, and cacheRows rounds a layer's new key
	// (value false) or value rows as the cache stores them.
	cacheType() onnx.DataType
	cacheIn(p *pass, layer int, value bool, x string) string
	cacheOut(p *pass, layer int, value bool, x string) string
	cacheRows(p *pass, layer int, value bool, x string) string
}

type floatQuant struct{}

func (floatQuant) linear(p *pass, n *graph.Node) (string, error) {
	w, ok := p.w[n.Weight]
	if !ok {
		return "", fmt.Errorf("weight %s missing", n.Weight)
	}
	K := int64(p.g.Nodes[n.In[0]].Cols)
	N := int64(n.Cols)
	t := p.st.put(n.Weight+".T", onnx.Float, []int64{K, N}, func() []byte {
		return floatBytes(transpose(w, int(N), int(K)))
	})
	return p.weight(t), nil
}

func (floatQuant) embed(p *pass, n *graph.Node) (string, error) {
	table, ok := p.w[n.Weight]
	if !ok {
		return "", fmt.Errorf("weight %s missing", n.Weight)
	}
	C := int64(n.Cols)
	V := int64(len(table)) / C
	t := p.st.put(n.Weight, onnx.Float, []int64{V, C}, func() []byte { return floatBytes(table) })
	return p.op("Gather", []string{p.weight(t), InputIDs}, intAttr("axis", 0)), nil
}

func (floatQuant) activation(_ *pass, _ *graph.Node, x string) string { return x }
func (floatQuant) output(_ *pass, _ *graph.Node, y string) string     { return y }
func (floatQuant) cacheType() onnx.DataType                           { return onnx.Float }
func (floatQuant) cacheIn(_ *pass, _ int, _ bool, x string) string    { return x }
func (floatQuant) cacheOut(_ *pass, _ int, _ bool, x string) string   { return x }
func (floatQuant) cacheRows(_ *pass, _ int, _ bool, x string) string  { return x }

// transpose returns the [cols, rows] transpose of w [rows, cols].
func transpose(w []float32, rows, cols int) []float32 {
	t := make([]float32, len(w))
	for r := 0; r < rows; r++ {
		for c := 0; c < cols; c++ {
			t[c*rows+r] = w[r*cols+c]
		}
	}
	return t
}
