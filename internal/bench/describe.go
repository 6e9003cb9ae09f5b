package bench

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	"github.com/aotlm/aotlm/internal/artifact"
	"github.com/aotlm/aotlm/internal/engine"
	"github.com/aotlm/aotlm/internal/kernel"
	"github.com/aotlm/aotlm/internal/op"
	"github.com/aotlm/aotlm/internal/plan"
)

// kvElemBytes returns the size of one KV cache element from the raw
// manifest's "kv_cache" object: 1 for a "u8" cache, 2 for "f16", 4
// (float32) when the object or its dtype is absent or "f32", and 0 for a
// "q4" or "q4v" cache, whose rows are sized per head (kernel.KVQ4RowBytes).
func kvElemBytes(raw json.RawMessage) (int, error) {
	var m struct {
		KVCache *struct {
			DType string `json:"dtype"`
		} `json:"kv_cache"`
	}
	if err := json.Unmarshal(raw, &m); err != nil {
		return 0, fmt.Errorf("bench: manifest.kv_cache: %w", err)
	}
	if m.KVCache == nil {
		return 4, nil
	}
	switch m.KVCache.DType {
	case "", "f32":
		return 4, nil
	case plan.KVCacheF16:
		return 2, nil
	case plan.KVCacheU8:
		return 1, nil
	case plan.KVCacheQ4, plan.KVCacheQ4V:
		return 0, nil
	}
	return 0, fmt.Errorf("bench: manifest.kv_cache.dtype: unknown cache dtype %q", m.KVCache.DType)
}

// arenaElemBytes is the size of one arena element (float32).
const arenaElemBytes = 4

// Info is what an artifact holds and what it costs in bytes.
type Info struct {
	// Path is the artifact's file, printed by WriteText when set.
	Path     string
	Manifest plan.Manifest
	// Raw is the manifest's JSON text as stored, fields the schema does not
	// know included.
	Raw   json.RawMessage
	Sizes Sizes
}

// Sizes is an artifact's byte accounting. Fields are bytes unless named
// otherwise.
type Sizes struct {
	File int64 `json:"file"`
	// Sections, Tensors and TensorCount are artifact.SizeBreakdown's.
	Sections    map[string]int64 `json:"sections"`
	Tensors     map[string]int64 `json:"tensors"`
	TensorCount map[string]int   `json:"tensor_count"`
	Params      int64            `json:"params"` // elements of all tensors
	KV          KVSize           `json:"kv"`
	Arenas      []Arena          `json:"arenas"` // one per plan, by AR length
	// State is the recurrent state of one sequence (the plans' state
	// slots; 0 for a model without), of which a session's state cache
	// keeps StateSets copies: the state at its last pass boundaries, for
	// rewinding, as many as StateBudget bytes hold (within the engine's
	// bounds, engine.StateSnapshotsWithin). ConvWindow is the causal_conv
	// input window a model whose only state is short convolutions also
	// keeps, to rewind inside a pass.
	State       int64 `json:"state,omitempty"`
	StateSets   int   `json:"state_sets,omitempty"`
	StateBudget int64 `json:"state_budget,omitempty"`
	ConvWindow  int64 `json:"conv_window,omitempty"`
	// Session is the memory one session allocates: the KV cache, the
	// largest arena and the recurrent state sets (the weights stay in the
	// mapped file).
	Session int64 `json:"session"`
	// Vision lists the vision plans of a vision-language model.
	Vision []VisionPlan `json:"vision,omitempty"`
	// Adapters lists the low-rank adapters the artifact carries.
	Adapters []AdapterSize `json:"adapters,omitempty"`
}

// VisionPlan describes a vision plan: its steps, the arena an encoder of
// it allocates, and the weights it reads.
type VisionPlan struct {
	Name    string `json:"name"`
	Blob    string `json:"blob"`
	Rows    int    `json:"rows"` // input rows of one pass (patches)
	Tokens  int    `json:"tokens"`
	Steps   int    `json:"steps"`
	Buffers int    `json:"buffers"`
	Bytes   int64  `json:"arena_bytes"`
	// Weights is the bytes of the tensors the plan reads, Tensors their
	// number, Storage the manifest's vision weights tag.
	Weights int64  `json:"weights_bytes"`
	Tensors int    `json:"tensors"`
	Storage string `json:"storage"`
	// Layouts splits Weights by the tensors' storage: "f32" for plain
	// float32, else the layout tag ("f16-rows", "w8-rows-p", ...).
	Layouts map[string]int64 `json:"layouts,omitempty"`
}

// KVSize is the static KV cache of a session: Layers x Ctx x Cols elements
// for keys and as many for values, of ElemBytes each (4 for float32, 1 for
// a u8 cache, whose few per-head scales are not counted), except that
// WindowLayers sliding-window layers take WindowSlots slots each instead
// of Ctx (their ring, engine.KVSlots). A 4-bit cache (ElemBytes 0) stores
// each key/value head of a position as a row of kernel.KVQ4RowBytes
// bytes. TokenBytes is what one position takes in every layer, keys and
// values.
type KVSize struct {
	Layers       int   `json:"layers"`
	Ctx          int   `json:"ctx"`
	Cols         int   `json:"cols"`
	ElemBytes    int   `json:"elem_bytes"`
	WindowLayers int   `json:"window_layers,omitempty"`
	WindowSlots  int   `json:"window_slots,omitempty"`
	TokenBytes   int64 `json:"token_bytes"`
	Bytes        int64 `json:"bytes"` // slots of every layer * Cols * 2 * ElemBytes
}

// kvSize sizes the cache of a session of plan p when the artifact's
// largest pass holds rows rows; elem 0 is a 4-bit cache.
func kvSize(p *plan.Plan, rows, elem int) KVSize {
	kv := KVSize{Layers: p.KV.Layers, Ctx: p.KV.Ctx, Cols: p.KV.Cols, ElemBytes: elem}
	// each layer's bytes of one slot, keys and values
	slot := make([]int64, p.KV.Layers)
	for l := range slot {
		slot[l] = int64(kv.Cols) * 2 * int64(elem)
	}
	if elem == 0 {
		for _, st := range p.Steps {
			if a := st.Attn; st.Op == op.Attention && a != nil && !a.Bidirectional && a.Layer < len(slot) {
				slot[a.Layer] = 2 * int64(a.KVHeads*kernel.KVQ4RowBytes(a.HeadDim))
			}
		}
	}
	for l, n := range engine.KVSlots(p, p.KV.Ctx, rows) {
		if l >= len(slot) {
			break
		}
		kv.Bytes += int64(n) * slot[l]
		kv.TokenBytes += slot[l]
		if n != p.KV.Ctx {
			kv.WindowLayers++
			kv.WindowSlots = max(kv.WindowSlots, n)
		}
	}
	return kv
}

// Arena describes the plan of one AR length and its activation arena.
type Arena struct {
	ARLen   int    `json:"ar_len"`
	Blob    string `json:"blob"`
	Steps   int    `json:"steps"`
	Buffers int    `json:"buffers"`
	Bytes   int64  `json:"bytes"`
}

// DescribeFile opens the artifact at path (verify: every checksum,
// the weights' too) and describes it, its sessions keeping the default
// state budget.
func DescribeFile(path string, verify bool) (Info, error) {
	return DescribeFileWith(path, DescribeOptions{Verify: verify})
}

// DescribeOptions say how DescribeFileWith reads an artifact and what
// its sessions are assumed to keep.
type DescribeOptions struct {
	Verify bool // check every checksum, the weights' too
	// StateBudget is the sessions' state budget in bytes
	// (engine.SessionOptions.StateBudget; 0: the default).
	StateBudget int64
}

// DescribeFileWith opens the artifact at path and describes it as o says.
func DescribeFileWith(path string, o DescribeOptions) (Info, error) {
	a, err := artifact.Open(path, artifact.OpenOptions{Verify: o.Verify})
	if err != nil {
		return Info{}, err
	}
	defer a.Close()
	return DescribeWith(a, o.StateBudget)
}

// Describe reads an opened artifact's manifest and plans and accounts for
// its bytes, its sessions keeping the default state budget. A manifest or
// plan the engine would refuse is an error naming it.
func Describe(a *artifact.Artifact) (Info, error) { return DescribeWith(a, 0) }

// DescribeWith is Describe for sessions whose state budget is
// stateBudget bytes (0: engine.DefaultStateBudget).
func DescribeWith(a *artifact.Artifact, stateBudget int64) (Info, error) {
	info := Info{Raw: a.ManifestJSON()}
	if err := a.Manifest(&info.Manifest); err != nil {
		return info, err
	}
	m := &info.Manifest
	if err := m.Validate(); err != nil {
		return info, fmt.Errorf("bench: %w", err)
	}
	elem, err := kvElemBytes(info.Raw)
	if err != nil {
		return info, err
	}
	b := a.SizeBreakdown()
	s := Sizes{File: b.File, Sections: b.Sections, Tensors: b.Tensors, TensorCount: b.TensorCount}
	s.Params = params(a)
	plans := make([]*plan.Plan, len(m.Plans))
	rows := 1
	for i, ref := range m.Plans {
		blob, err := a.Blob(ref.Blob)
		if err != nil {
			return info, fmt.Errorf("bench: manifest.plans[%d]: %w", i, err)
		}
		if plans[i], err = plan.Decode(blob); err != nil {
			return info, fmt.Errorf("bench: %s: %w", ref.Blob, err)
		}
		rows = max(rows, plans[i].Rows)
	}
	for i, ref := range m.Plans {
		p := plans[i]
		kv := kvSize(p, rows, elem)
		if i > 0 && kv != s.KV {
			return info, fmt.Errorf("bench: %s: cache layout %+v differs from %+v", ref.Blob, kv, s.KV)
		}
		s.KV = kv
		s.Arenas = append(s.Arenas, Arena{ARLen: ref.ARLen, Blob: ref.Blob, Steps: len(p.Steps),
			Buffers: len(p.Buffers), Bytes: int64(p.Arena) * arenaElemBytes})
		if sm := engine.PlanStateMemory(p, p.KV.Ctx, 0, stateBudget); sm.SetBytes > s.State {
			s.State, s.StateSets, s.ConvWindow = sm.SetBytes, sm.Sets, sm.ConvWindow
			s.StateBudget = stateBudget
			if s.StateBudget <= 0 {
				s.StateBudget = engine.DefaultStateBudget
			}
		}
	}
	slices.SortFunc(s.Arenas, func(x, y Arena) int { return x.ARLen - y.ARLen })
	var arena int64
	for _, ar := range s.Arenas {
		arena = max(arena, ar.Bytes)
	}
	s.Session = s.KV.Bytes + arena + s.State*int64(s.StateSets) + s.ConvWindow
	if m.Vision != nil {
		for i, ref := range m.Vision.Plans {
			vp, err := describeVision(a, ref)
			if err != nil {
				return info, fmt.Errorf("bench: manifest.vision.plans[%d]: %w", i, err)
			}
			vp.Storage = m.Vision.Weights
			s.Vision = append(s.Vision, vp)
		}
	}
	for i, ref := range m.Adapters {
		b, err := a.Blob(ref.Blob)
		var ls []plan.AdapterLinear
		if err == nil {
			ls, err = plan.DecodeAdapter(b)
		}
		if err != nil {
			return info, fmt.Errorf("bench: manifest.adapters[%d]: %w", i, err)
		}
		as := AdapterSize{Name: ref.Name, Source: ref.Source, Scale: ref.Scale, Blob: ref.Blob, Linears: len(ls), Bytes: int64(len(b))}
		for _, l := range ls {
			as.Rank = max(as.Rank, l.Rank)
		}
		s.Adapters = append(s.Adapters, as)
	}
	info.Sizes = s
	return info, nil
}

// AdapterSize describes a low-rank adapter an artifact carries: its
// name, where it came from, the scale folded in, how many linears it
// changes, their largest rank, and its blob's bytes.
type AdapterSize struct {
	Name    string  `json:"name"`
	Source  string  `json:"source,omitempty"`
	Scale   float64 `json:"scale"`
	Blob    string  `json:"blob"`
	Linears int     `json:"linears"`
	Rank    int     `json:"rank"`
	Bytes   int64   `json:"bytes"`
}

// describeVision accounts for one vision plan.
func describeVision(a *artifact.Artifact, ref plan.VisionPlanRef) (VisionPlan, error) {
	blob, err := a.Blob(ref.Blob)
	if err != nil {
		return VisionPlan{}, err
	}
	p, err := plan.Decode(blob)
	if err != nil {
		return VisionPlan{}, fmt.Errorf("%s: %w", ref.Blob, err)
	}
	vp := VisionPlan{Name: ref.Name, Blob: ref.Blob, Rows: p.Rows, Tokens: p.Buffers[p.Output].Rows, Steps: len(p.Steps),
		Buffers: len(p.Buffers), Bytes: int64(p.Arena) * arenaElemBytes}
	seen := map[string]bool{}
	for _, st := range p.Steps {
		for _, w := range st.Weights {
			if seen[w] {
				continue
			}
			seen[w] = true
			info, _, err := a.Tensor(w)
			if err != nil {
				return vp, fmt.Errorf("%s: %w", ref.Blob, err)
			}
			vp.Weights += info.Size
			vp.Tensors++
			l := info.Layout
			if l == "" {
				l = info.DType.String()
			}
			if vp.Layouts == nil {
				vp.Layouts = map[string]int64{}
			}
			vp.Layouts[l] += info.Size
		}
	}
	return vp, nil
}

// MarshalJSON writes the manifest object as stored with a "sizes" field
// added.
func (i Info) MarshalJSON() ([]byte, error) {
	fields := map[string]json.RawMessage{}
	if len(i.Raw) > 0 {
		if err := json.Unmarshal(i.Raw, &fields); err != nil {
			return nil, fmt.Errorf("bench: manifest: %w", err)
		}
	}
	sizes, err := json.Marshal(i.Sizes)
	if err != nil {
		return nil, err
	}
	fields["sizes"] = sizes
	return json.Marshal(fields)
}

// sortedKeys returns m's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}

// CheckFinite opens the artifact at path and reads every weight back
// (quantized rows dequantized), returning an error naming the first NaN
// or infinity.
func CheckFinite(path string) error {
	e, err := engine.Open(path)
	if err != nil {
		return err
	}
	defer e.Close()
	if err := e.CheckFinite(); err != nil {
		return fmt.Errorf("inspect: %s: %w", path, err)
	}
	return nil
}
