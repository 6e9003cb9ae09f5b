package lora

import (
	"encoding/json"
	"fmt"

	"github.com/aotlm/aotlm/internal/arch"
	"github.com/aotlm/aotlm/internal/engine"
	"github.com/aotlm/aotlm/internal/op"
	"github.com/aotlm/aotlm/internal/plan"
	"github.com/aotlm/aotlm/internal/quant"
	"github.com/aotlm/aotlm/internal/rotate"
)

// ConfigOfEngine returns the model config an artifact's manifest
// records (its hyper-parameters).
func ConfigOfEngine(e *engine.Engine) (*arch.Config, error) {
	m := e.Manifest()
	b, err := json.Marshal(m.HyperParams)
	if err != nil {
		return nil, fmt.Errorf("lora: the artifact's hyper-parameters: %w", err)
	}
	var c arch.Config
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("lora: the artifact's hyper-parameters: %w", err)
	}
	if c.Family == "" {
		return nil, fmt.Errorf("lora: the artifact records no model family")
	}
	return &c, nil
}

// ForEngine reads the adapter at path, makes it an engine adapter named
// name for the model e runs, with scale folded into its own (choosing it
// at scale 1 applies it at scale), its matrices held as storage says,
// and loads it into e (see Linears).
func ForEngine(e *engine.Engine, name, path string, scale float64, storage engine.AdapterStorage) (*engine.Adapter, error) {
	c, err := ConfigOfEngine(e)
	if err != nil {
		return nil, err
	}
	rot, err := RotationMap(e.Manifest().Recipe, e.Manifest().Rotation)
	if err != nil {
		return nil, err
	}
	ls, err := RotatedLinears(c, path, scale, rot)
	if err != nil {
		return nil, err
	}
	ad, err := engine.NewAdapter(name, ls, storage)
	if err != nil {
		return nil, err
	}
	if err := e.AddAdapter(ad); err != nil {
		return nil, err
	}
	return ad, nil
}

// RotationMap returns how adapters for the unrotated model map onto
// the weights of an artifact of recipe (its JSON; none for nil) and
// rotation record (the manifest's, rotate.Report as JSON), nil when
// they apply unchanged, or why they cannot: the R1 and R2 rotations map
// through what the record keeps (rotate.NewAdapterMap), AWQ's and
// SmoothQuant's per-channel scales are refused.
func RotationMap(recipe, record []byte) (*rotate.AdapterMap, error) {
	if len(recipe) == 0 {
		return nil, nil
	}
	rcp, err := quant.ParseRecipe(recipe)
	if err != nil {
		return nil, fmt.Errorf("lora: the artifact's recipe: %w", err)
	}
	if err := checkScales(rcp); err != nil {
		return nil, err
	}
	if rot := rcp.Rotation; rot.R1 == quant.RotationNone && rot.R2 == quant.RotationNone {
		return nil, nil
	}
	if len(record) == 0 {
		return nil, fmt.Errorf("lora: the artifact's weights are rotated by R1 or R2 (recipe %q) and its manifest has no rotation record (the norm gains R1 folded): an adapter for the unrotated model applies only merged (quantize --lora)", rcp.Name)
	}
	var rep rotate.Report
	if err := json.Unmarshal(record, &rep); err != nil {
		return nil, fmt.Errorf("lora: the artifact's rotation record: %w", err)
	}
	if rep.R1 != rcp.Rotation.R1 || rep.R2 != rcp.Rotation.R2 {
		return nil, fmt.Errorf("lora: the artifact's rotation record (R1 %q, R2 %q) is not its recipe's (R1 %q, R2 %q)", rep.R1, rep.R2, rcp.Rotation.R1, rcp.Rotation.R2)
	}
	am, err := rotate.NewAdapterMap(&rep)
	if err != nil {
		return nil, fmt.Errorf("lora: the artifact's rotation record: %w", err)
	}
	return am, nil
}

// checkScales refuses adapters on weights whose input channels a
// recipe rescaled (AWQ, smooth_alpha).
func checkScales(rcp quant.Recipe) error {
	if rcp.Calibration.AWQ || rcp.Calibration.SmoothAlpha > 0 {
		return fmt.Errorf("lora: the artifact's linears are rescaled by channel (recipe %q uses AWQ or smooth_alpha): an adapter for the unscaled model applies only merged (quantize --lora)", rcp.Name)
	}
	return nil
}

// CheckRecipe refuses adapters on an artifact whose recipe (its JSON;
// none for nil) rewrote the weights in a way an adapter for the base
// model cannot follow without a rotation record (see RotationMap):
// rotations (R1 also folds the norms' gains into the rotated weights)
// and AWQ's or SmoothQuant's per-channel scales (divided out of the norm
// or linear before).
func CheckRecipe(r []byte) error {
	_, err := RotationMap(r, nil)
	return err
}

// Named is an adapter given a name: what serve, run and an artifact that
// carries adapters choose it by.
type Named struct {
	Name string
	Spec
}

// Linears reads the adapter at path and resolves it against the model
// of config c, in the graph's layout, with scale folded into each
// linear's: the linears the engine adds beside its own (an artifact's
// adapter blob); a linear whose input the model rotates online (R4's
// Hadamard step before the down projection) gets its A rotated alike. A
// DoRA adapter's linears carry its magnitudes: the
// engine rescales each output row by its magnitude over the norm of that
// row of the adapted weight, computed from the base weights at load.
func Linears(c *arch.Config, path string, scale float64) ([]plan.AdapterLinear, error) {
	return RotatedLinears(c, path, scale, nil)
}

// RotatedLinears is Linears on weights rotated as rot maps (nil: none,
// see RotationMap): each pair on a rotated linear is mapped through rot
// first.
func RotatedLinears(c *arch.Config, path string, scale float64, rot *rotate.AdapterMap) ([]plan.AdapterLinear, error) {
	a, err := Read(path)
	if err != nil {
		return nil, err
	}
	g, err := arch.Build(c, arch.BuildOptions{})
	if err != nil {
		return nil, fmt.Errorf("lora: %w", err)
	}
	r, err := Resolve(a, c, g.Weights, true)
	if err != nil {
		return nil, err
	}
	// a linear that reads a Hadamard step's output (R4's down
	// projection, W·H) sees x·H: its A becomes A·H (H symmetric, H·H = I)
	rotated := map[string]int{}
	for _, n := range g.Nodes {
		if n.Op == op.Linear && len(n.In) > 0 && g.Nodes[n.In[0]].Op == op.Hadamard {
			rotated[n.Weight] = g.Nodes[n.In[0]].HeadDim
		}
	}
	var ls []plan.AdapterLinear
	for _, w := range (&Adapter{Pairs: r.Pairs}).Names() {
		p := r.Pairs[w]
		if rot != nil && rot.Rotated(w) {
			if p.Magnitude != nil {
				return nil, fmt.Errorf("lora: %s: DoRA's row norms do not carry over to a weight rotated by R1 or R2: merge the adapter instead (quantize --lora)", w)
			}
			q := *p
			if q.A, q.B, err = rot.Map(w, p.Rank, p.In, p.Out, p.A, p.B); err != nil {
				return nil, fmt.Errorf("lora: %w", err)
			}
			p = &q
		}
		if b := rotated[w]; b > 0 {
			if p.In%b != 0 {
				return nil, fmt.Errorf("lora: %s: %d columns do not split into Hadamard blocks of %d", w, p.In, b)
			}
			q := *p
			q.A = make([]float32, len(p.A))
			for k := range p.Rank {
				op.HadamardRows(q.A[k*p.In:(k+1)*p.In], p.A[k*p.In:(k+1)*p.In], b)
			}
			p = &q
		}
		ls = append(ls, plan.AdapterLinear{Weight: w, Rank: p.Rank, In: p.In, Out: p.Out, A: p.A, B: p.B, Scale: float32(float64(p.Scale) * scale), Magnitude: p.Magnitude})
	}
	return ls, nil
}
