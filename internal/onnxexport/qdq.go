package onnxexport

import (
	"errors"

	"github.com/aotlm/aotlm/internal/graph"
)

// QDQ configures the quantized form of an export.
type QDQ struct{}

type qdqQuant struct{ floatQuant }

func newQDQ(q *QDQ, g *graph.Graph, w graph.Weights) (*qdqQuant, error) {
	return nil, errors.New("onnx export: qdq not yet")
}
