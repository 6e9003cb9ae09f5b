package llama2c

import (
	"bytes"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

// randomModel returns random values for every tensor a file of cfg holds
// (freq tables excluded).
func randomModel(cfg Config, seed uint64) map[string][]float32 {
	r := rand.New(rand.NewPCG(seed, 7))
	m := map[string][]float32{}
	for _, s := range layout(cfg, 1) {
		v := make([]float32, s.numel())
		for i := range v {
			v[i] = float32(r.NormFloat64())
		}
		m[s.name] = v
	}
	return m
}

// smallConfig is a GQA model with dims small enough for fuzz seeds.
func smallConfig(shared bool) Config {
	return Config{Dim: 16, HiddenDim: 24, NLayers: 2, NHeads: 4, NKVHeads: 2, VocabSize: 10, SeqLen: 6, SharedClassifier: shared}
}

// encodeFile writes a file with the given writer into a temp folder and
// returns its bytes.
func encodeFile(t testing.TB, write func(string, Config, map[string][]float32) error, cfg Config, m map[string][]float32) []byte {
	t.Helper()
	path := filepath.Join(t.TempDir(), "m.bin")
	if err := write(path, cfg, m); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func openBytes(b []byte) (*Checkpoint, error) {
	return OpenReader(bytes.NewReader(b), int64(len(b)), "crafted.bin")
}

func bitEqual(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return false
		}
	}
	return true
}

// ulpDiff is the distance in float32 steps between two finite values of
// the same sign.
func ulpDiff(a, b float32) int {
	d := int64(math.Float32bits(a)) - int64(math.Float32bits(b))
	if d < 0 {
		d = -d
	}
	return int(d)
}
