package tokenizer
import ("testing";"time";"math/rand/v2";"github.com/aotlm/aotlm/internal/testutil")
func TestDbgHang(t *testing.T) {
	seed := testutil.ReadFile(t, "llama2c/tok512-dratman/tok512.model")
	rng := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < 3000; i++ {
		d := append([]byte(nil), seed...)
		for k := 0; k < 1+rng.IntN(4); k++ { d[rng.IntN(len(d))] = byte(rng.IntN(256)) }
		done := make(chan bool)
		go func() {
			sp, err := ParseSentencePiece(d)
			if err == nil { for _, s := range []string{"a", " hello  world ", "\xff", "<s>"} { sp.Decode(sp.Encode(s, EncodeOptions{AddSpecial: true, ParseSpecial: true})) } }
			close(done)
		}()
		select {
		case <-done:
		case <-time.After(2 * time.Second):
			sp, err := parseSpmModelProto(d)
			t.Fatalf("hang at %d: err %v pieces %d trainer %+v norm %+v", i, err, len(sp.pieces), sp.trainer, sp.normalizer)
		}
	}
}
