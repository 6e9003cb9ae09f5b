package eval

import (
	"fmt"
	"math"
)

// NLL returns -log softmax(row)[target] in float64:
//
//	m = max_j row[j]
//	NLL = (m - row[target]) + log(sum_j exp(row[j] - m))
//
// row is one position's logits over the vocabulary (V = len(row)). It
// fails on a target outside [0, V) and on logits that give no finite value
// (NaN, or +Inf anywhere).
func NLL(row []float32, target int) (float64, error) {
	if target < 0 || target >= len(row) {
		return 0, fmt.Errorf("token id %d is outside the model's %d logits", target, len(row))
	}
	m := math.Inf(-1)
	for _, v := range row {
		if f := float64(v); f > m {
			m = f
		}
	}
	var sum float64
	for _, v := range row {
		sum += math.Exp(float64(v) - m)
	}
	nll := (m - float64(row[target])) + math.Log(sum) // difference first: exact for large logits
	if math.IsNaN(nll) || math.IsInf(nll, 0) {
		return 0, fmt.Errorf("logits give no finite log-probability for token %d (max logit %g, logit %g)", target, m, row[target])
	}
	return nll, nil
}
