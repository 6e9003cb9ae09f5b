package plan

import "testing"

// TestLayoutTableComplete: every registered layout family has every part
// of its entry and names its scheme, and its tags parse back to it.
func TestLayoutTableComplete(t *testing.T) {
	kinds := LayoutKinds()
	if len(kinds) != 7 {
		t.Fatalf("%d layout families, want 7 (w8, lpbq, q4, f16, q4k, q6k, lpbq5)", len(kinds))
	}
	schemes := map[string]bool{}
	for _, k := range kinds {
		e := layouts[k]
		if e.scheme == "" || e.parse == nil || e.tag == nil || e.parts == nil || e.canPack == nil {
			t.Fatalf("layout kind %d: incomplete entry %+v", k, e)
		}
		if schemes[e.scheme] {
			t.Errorf("scheme %s has two layout families", e.scheme)
		}
		schemes[e.scheme] = true
		l := WeightLayout{Kind: k, Packed: e.forms == packedOnly}
		switch {
		case k == LayoutQ4K:
			l.Block = PackBlock
		case k == LayoutLPBQ || k == LayoutQ4:
			l.Block = 64
		}
		got, err := ParseLayout(l.Tag())
		if err != nil || got != l {
			t.Errorf("%s: %q parses as %+v, %v", e.scheme, l.Tag(), got, err)
		}
		if k.Scheme() != e.scheme {
			t.Errorf("kind %d: Scheme() %q", k, k.Scheme())
		}
		if _, err := l.Parts(4, 512); err != nil {
			t.Errorf("%s: %v", l.Tag(), err)
		}
		if e.forms == bothForms {
			p := l
			p.Packed = true
			if got, err := ParseLayout(p.Tag()); err != nil || got != p {
				t.Errorf("%s: %q parses as %+v, %v", e.scheme, p.Tag(), got, err)
			}
		}
	}
	if LayoutPlain.Scheme() != "" {
		t.Error("the plain layout names a scheme")
	}
}
