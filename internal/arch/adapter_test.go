package arch

import "testing"

// TestConvertedLinear checks the permutations ConvertedLinear finds
// against the conversion itself on the fixtures' weights: every element
// of a converted linear weight is the checkpoint's element at the rows
// and columns it gives. Qwen3.5 moves rows (in_proj_*) and columns
// (out_proj), CodeGen rows (qkv_proj), Granite 4 hybrid none of its
// linears; a conversion that changes values (Qwen3.5's norm gains, +1)
// is refused.
func TestConvertedLinear(t *testing.T) {
	for _, c := range []struct {
		family           string
		wantRows, wantCl bool
	}{{"qwen35", true, true}, {"codegen2", true, false}, {"granitehybrid", false, false}} {
		src, err := Open(openFixture(t, "arch/"+c.family))
		if err != nil {
			t.Fatal(err)
		}
		g, err := Build(&src.Config, BuildOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var movedRows, movedCols int
		for _, name := range src.Names() {
			sh := src.Shapes[name]
			if len(sh) != 2 || len(g.Weights[name]) != 2 {
				continue
			}
			out, in := sh[0], sh[1]
			rows, cols, err := ConvertedLinear(&src.Config, name, out, in)
			if err != nil {
				t.Errorf("%s: %v", c.family, err)
				continue
			}
			raw, err := src.ck.ReadFloat32(src.names[name])
			if err != nil {
				t.Fatal(err)
			}
			conv, err := src.Read(name)
			if err != nil {
				t.Fatal(err)
			}
			if rows != nil {
				movedRows++
			}
			if cols != nil {
				movedCols++
			}
			for o := range out {
				ro := o
				if rows != nil {
					ro = rows[o]
				}
				for i := range in {
					ci := i
					if cols != nil {
						ci = cols[i]
					}
					if conv[o*in+i] != raw[ro*in+ci] {
						t.Fatalf("%s %s: converted [%d,%d] = %g, the checkpoint's [%d,%d] is %g", c.family, name, o, i, conv[o*in+i], ro, ci, raw[ro*in+ci])
					}
				}
			}
		}
		t.Logf("%s: %d linears with rows moved, %d with columns moved", c.family, movedRows, movedCols)
		if (movedRows > 0) != c.wantRows || (movedCols > 0) != c.wantCl {
			t.Errorf("%s: %d linears with rows moved, %d with columns moved; want rows %v, columns %v", c.family, movedRows, movedCols, c.wantRows, c.wantCl)
		}
	}
	src, err := Open(openFixture(t, "arch/qwen35"))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := ConvertedLinear(&src.Config, "model.layers.0.input_layernorm.weight", 1, src.Config.Hidden); err == nil {
		t.Error("a norm gain's conversion (+1) passed for a permutation")
	}
}
