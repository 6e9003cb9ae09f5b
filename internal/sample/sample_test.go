package sample

import (
	"math"
	"math/rand"
	"slices"
	"testing"
)

func randomLogits(r *rand.Rand, n int) []float32 {
	l := make([]float32, n)
	for i := range l {
		l[i] = float32(r.NormFloat64() * 3)
	}
	return l
}

func TestGreedyIsArgmax(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	s := New(Params{})
	for i := 0; i < 100; i++ {
		l := randomLogits(r, 50)
		best := 0
		for j := range l {
			if l[j] > l[best] {
				best = j
			}
		}
		if got := s.Sample(l, nil); got != best {
			t.Fatalf("greedy picked %d, argmax is %d", got, best)
		}
	}
	if Argmax([]float32{1, 3, 3, 2}) != 1 {
		t.Fatal("ties must go to the lowest id")
	}
}

func TestSeedReproducible(t *testing.T) {
	r := rand.New(rand.NewSource(2))
	l := randomLogits(r, 100)
	p := Params{Temperature: 0.8, TopP: 0.9, TopK: 40, Seed: 7}
	a, b := New(p), New(p)
	same := true
	for i := 0; i < 50; i++ {
		if a.Sample(l, nil) != b.Sample(l, nil) {
			same = false
		}
	}
	if !same {
		t.Fatal("same seed gave different draws")
	}
}

// TestDistribution checks that at temperature 1 with no truncation the draw
// frequencies follow softmax(logits) within 4 standard errors.
func TestDistribution(t *testing.T) {
	l := []float32{0, 1, 2, 0.5}
	var z float64
	for _, v := range l {
		z += math.Exp(float64(v))
	}
	s := New(Params{Temperature: 1, Seed: 3})
	const n = 40000
	count := make([]int, len(l))
	for i := 0; i < n; i++ {
		count[s.Sample(l, nil)]++
	}
	for i, v := range l {
		p := math.Exp(float64(v)) / z
		se := math.Sqrt(p * (1 - p) / n)
		if got := float64(count[i]) / n; math.Abs(got-p) > 4*se {
			t.Errorf("id %d drawn %.4f, want %.4f", i, got, p)
		}
	}
}

func TestTruncation(t *testing.T) {
	l := []float32{5, 4, 3, 0, -1}
	s := New(Params{Temperature: 1, TopK: 2, Seed: 4})
	for i := 0; i < 1000; i++ {
		if id := s.Sample(l, nil); id > 1 {
			t.Fatalf("top-k 2 drew id %d", id)
		}
	}
	// top-p 0.5: p(0) = 0.66 alone covers it
	s = New(Params{Temperature: 1, TopP: 0.5, Seed: 5})
	for i := 0; i < 1000; i++ {
		if id := s.Sample(l, nil); id != 0 {
			t.Fatalf("top-p 0.5 drew id %d", id)
		}
	}
	// min-p 0.3: p(1)/p(0) = e^-1 = 0.37 stays, p(2)/p(0) = 0.135 goes
	s = New(Params{Temperature: 1, MinP: 0.3, Seed: 6})
	for i := 0; i < 1000; i++ {
		if id := s.Sample(l, nil); id > 1 {
			t.Fatalf("min-p 0.3 drew id %d", id)
		}
	}
}

func TestRepeatPenalty(t *testing.T) {
	l := []float32{2, 1.9}
	s := New(Params{RepeatPenalty: 1.5})
	if got := s.Sample(l, []int{0}); got != 1 {
		t.Fatalf("penalized id 0 still chosen (%d)", got)
	}
	if l[0] != 2 {
		t.Fatal("penalty modified the caller's logits")
	}
}

func TestNoAllocs(t *testing.T) {
	r := rand.New(rand.NewSource(8))
	l := randomLogits(r, 1000)
	s := New(Params{Temperature: 0.7, TopP: 0.9, Seed: 1})
	s.Sample(l, nil)
	if a := testing.AllocsPerRun(20, func() { s.Sample(l, []int{1, 2}) }); a > 1 {
		t.Fatalf("%v allocations per sample", a)
	}
}

func TestValidate(t *testing.T) {
	bad := []Params{{Temperature: -1}, {TopP: 1.5}, {TopK: -2}, {MinP: -0.1}}
	for _, p := range bad {
		if p.Validate() == nil {
			t.Errorf("%+v accepted", p)
		}
	}
	if (Params{Temperature: 0.8, TopP: 0.95}).Validate() != nil {
		t.Error("good params refused")
	}
}

// TestSelectTopMatchesSort checks the heap selection against a full sort on
// random probabilities with ties, for every k.
func TestSelectTopMatchesSort(t *testing.T) {
	r := rand.New(rand.NewSource(9))
	for trial := 0; trial < 50; trial++ {
		n := 1 + r.Intn(300)
		c := make([]cand, n)
		for i := range c {
			c[i] = cand{i, float32(r.Intn(20)) / 20} // many ties
		}
		want := append([]cand(nil), c...)
		slices.SortFunc(want, byProbability)
		for k := 1; k <= n; k++ {
			got := selectTop(append([]cand(nil), c...), k)
			slices.SortFunc(got, byProbability)
			if !slices.Equal(got, want[:k]) {
				t.Fatalf("n %d k %d: %v, want %v", n, k, got, want[:k])
			}
		}
	}
}

// BenchmarkSampleLargeVocab samples with llama.cpp's default chain over a
// Qwen-sized vocabulary.
func BenchmarkSampleLargeVocab(b *testing.B) {
	r := rand.New(rand.NewSource(10))
	l := randomLogits(r, 151936)
	s := New(Params{Temperature: 0.8, TopK: 40, TopP: 0.95, MinP: 0.05, Seed: 1})
	for b.Loop() {
		s.Sample(l, nil)
	}
}

func TestPresenceFrequencyPenalty(t *testing.T) {
	// id 0 leads by 0.5; seen twice, a presence penalty of 0.4 alone
	// leaves it ahead, adding a frequency penalty of 0.1 per use (0.6
	// in all) moves the choice to id 1.
	l := []float32{2, 1.5, 0.5}
	if got := New(Params{PresencePenalty: 0.4}).Sample(l, []int{0, 0}); got != 0 {
		t.Fatalf("presence 0.4: chose %d, want 0", got)
	}
	if got := New(Params{PresencePenalty: 0.4, FrequencyPenalty: 0.1}).Sample(l, []int{0, 0}); got != 1 {
		t.Fatalf("presence 0.4 + frequency 0.1 x2: chose %d, want 1", got)
	}
	if got := New(Params{FrequencyPenalty: 0.2}).Sample(l, []int{0}); got != 0 {
		t.Fatalf("frequency 0.2 x1: chose %d, want 0", got)
	}
	if got := New(Params{FrequencyPenalty: 0.2}).Sample(l, []int{0, 0, 0}); got != 1 {
		t.Fatalf("frequency 0.2 x3: chose %d, want 1", got)
	}
	// a negative presence penalty favours what was seen
	if got := New(Params{PresencePenalty: -2}).Sample(l, []int{2}); got != 2 {
		t.Fatalf("presence -2: chose %d, want 2", got)
	}
	if l[0] != 2 || l[1] != 1.5 || l[2] != 0.5 {
		t.Fatalf("penalties modified the caller's logits: %v", l)
	}
	for _, p := range []Params{{PresencePenalty: 2.5}, {FrequencyPenalty: -3}} {
		if p.Validate() == nil {
			t.Errorf("%+v accepted", p)
		}
	}
}
