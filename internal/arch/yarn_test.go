package arch

import (
	"math"
	"strings"
	"testing"
)

// qwen3Yarn is a config with Qwen3's rotary shape and the YaRN scaling
// its model cards give for 131072 positions: head size 128, theta 1e6,
// factor 4 over an original context of 32768.
func qwen3Yarn() Config {
	c := goodConfig()
	c.HeadDim, c.Heads, c.KVHeads, c.Hidden = 128, 2, 1, 256
	c.RopeTheta, c.Context = 1e6, 131072
	c.RopeScaling = RopeScaling{Type: "yarn", Factor: 4, OriginalMaxPosition: 32768}
	return c
}

// TestYarnFrequencies checks YaRN's frequencies on Qwen3's shape against
// values worked out by hand from the paper's rule: the correction
// dimensions of 32 and 1 rotations over 32768 positions are
// 128*ln(32768/(2*pi*r))/(2*ln(1e6)) = 23.596 and 39.651, so pairs up to
// 23 keep theta^(-2i/128), pairs from 40 on are divided by 4, and pair i
// in between mixes the two with weight (i-23)/17 on the divided one; the
// attention factor is 0.1*ln(4)+1.
func TestYarnFrequencies(t *testing.T) {
	c := qwen3Yarn()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	r, err := ropeOf(&c)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.InvFreq) != 64 {
		t.Fatalf("%d frequencies, want 64", len(r.InvFreq))
	}
	for i, got := range r.InvFreq {
		base := math.Pow(1e6, -float64(2*i)/128)
		ramp := min(max((float64(i)-23)/17, 0), 1)
		want := base*(1-ramp) + base/4*ramp
		if math.Abs(got-want) > 1e-14*want {
			t.Errorf("pair %d: %v, want %v", i, got, want)
		}
	}
	if base := math.Pow(1e6, -2*23.0/128); r.InvFreq[23] != base {
		t.Errorf("pair 23 (below the ramp) is %v, want the base %v", r.InvFreq[23], base)
	}
	if want := 0.1*math.Log(4) + 1; math.Abs(float64(r.Scale)-want) > 1e-6 {
		t.Errorf("attention factor %v, want %v", r.Scale, want)
	}

	// mscale over mscale_all_dim (DeepSeek), and a given attention factor
	c.RopeScaling.Mscale, c.RopeScaling.MscaleAllDim = 0.707, 1
	if got, want := yarnMagnitude(&c), (0.1*0.707*math.Log(4)+1)/(0.1*math.Log(4)+1); math.Abs(got-want) > 1e-12 {
		t.Errorf("mscale ratio %v, want %v", got, want)
	}
	c.RopeScaling.AttentionFactor = 1.5
	if got := yarnMagnitude(&c); got != 1.5 {
		t.Errorf("attention_factor 1.5 gives %v", got)
	}

	// without truncation the ramp runs between the unrounded dimensions
	c = qwen3Yarn()
	c.RopeScaling.NoTruncate = true
	f, err := ropeFreqs(&c)
	if err != nil {
		t.Fatal(err)
	}
	lo, hi := 23.5959476083381, 39.6508807104171
	for _, i := range []int{23, 24, 30, 39, 40} {
		base := math.Pow(1e6, -float64(2*i)/128)
		ramp := min(max((float64(i)-lo)/(hi-lo), 0), 1)
		if want := base*(1-ramp) + base/4*ramp; math.Abs(f[i]-want) > 1e-9*want {
			t.Errorf("untruncated pair %d: %v, want %v", i, f[i], want)
		}
	}
}

// TestYarnConfigs reads YaRN from config.json's rope_scaling and from
// GGUF metadata, and refuses unusable values naming the field.
func TestYarnConfigs(t *testing.T) {
	s, err := ropeScalingHF(map[string]any{"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768.0,
		"beta_fast": 16.0, "truncate": false})
	if err != nil {
		t.Fatal(err)
	}
	if s.Type != "yarn" || s.Factor != 4 || s.OriginalMaxPosition != 32768 || s.BetaFast != 16 || s.BetaSlow != 1 || !s.NoTruncate {
		t.Errorf("config.json yarn read as %+v", s)
	}
	g, err := decoderConfigGGUF(map[string]any{
		"qwen3.embedding_length": int64(256), "qwen3.feed_forward_length": int64(512), "qwen3.block_count": int64(2),
		"qwen3.attention.head_count": int64(2), "qwen3.context_length": int64(131072),
		"qwen3.rope.scaling.type": "yarn", "qwen3.rope.scaling.factor": 4.0,
		"qwen3.rope.scaling.original_context_length": int64(32768)}, "qwen3", "qwen3", 0)
	if err != nil {
		t.Fatal(err)
	}
	if rs := g.RopeScaling; rs.Type != "yarn" || rs.Factor != 4 || rs.OriginalMaxPosition != 32768 || rs.BetaFast != 32 || rs.BetaSlow != 1 {
		t.Errorf("GGUF yarn read as %+v", rs)
	}
	for _, c := range []struct {
		field string
		edit  func(*RopeScaling)
	}{
		{"factor", func(s *RopeScaling) { s.Factor = 0 }},
		{"beta_fast", func(s *RopeScaling) { s.BetaFast = math.NaN() }},
		{"mscale", func(s *RopeScaling) { s.Mscale = -1 }},
		{"original_max_position_embeddings", func(s *RopeScaling) { s.OriginalMaxPosition = -5 }},
	} {
		cfg := qwen3Yarn()
		c.edit(&cfg.RopeScaling)
		err := cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), c.field) {
			t.Errorf("yarn with a bad %s: error %v, want one naming it", c.field, err)
		}
	}
}
