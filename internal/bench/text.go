package bench

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/aotlm/aotlm/internal/passport"
)

// WriteText prints the manifest and the size breakdown for a reader.
func (i Info) WriteText(w io.Writer) error {
	m, s := &i.Manifest, &i.Sizes
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	row := func(k string, f string, args ...any) { fmt.Fprintf(tw, "%s\t"+f+"\n", append([]any{k}, args...)...) }
	if i.Path != "" {
		row("file", "%s", i.Path)
	}
	row("architecture", "%s", m.Architecture)
	row("format", "%s", m.Format)
	row("vocab", "%d (bos %d, eos %v)", m.Vocab, m.BOS, m.EOS)
	if x := m.Extend; x != nil && x.Max > m.Ctx {
		row("ctx", "%d (sessions may extend it to the trained %d)", m.Ctx, x.Max)
	} else {
		row("ctx", "%d", m.Ctx)
	}
	row("weights", "%s", m.Weights)
	if m.Tokenizer != nil {
		row("tokenizer", "%s (blob %q)", m.Tokenizer.Kind, m.Tokenizer.Blob)
	} else {
		row("tokenizer", "none")
	}
	if m.ChatTemplate != "" {
		row("chat template", "%d bytes", len(m.ChatTemplate))
	} else {
		row("chat template", "none")
	}
	section := func(name string, kv map[string]any) {
		if len(kv) == 0 {
			return
		}
		fmt.Fprintf(tw, "%s:\n", name)
		for _, k := range sortedKeys(kv) {
			row("  "+k, "%s", compact(kv[k]))
		}
	}
	section("hyper-parameters", m.HyperParams)
	section("provenance", m.Provenance)
	if err := tw.Flush(); err != nil {
		return err
	}
	if p, err := passport.Parse(m.Passport); err != nil {
		return err
	} else if p != nil {
		if err := p.WriteText(w); err != nil {
			return err
		}
	}
	fmt.Fprintf(tw, "plans:\n")
	for _, a := range s.Arenas {
		row(fmt.Sprintf("  AR-%d", a.ARLen), "%d steps, %d buffers, arena %s (%d bytes)\tblob %q",
			a.Steps, a.Buffers, Human(a.Bytes), a.Bytes, a.Blob)
	}
	for _, v := range s.Vision {
		row("  "+v.Name, "%d rows in, %d tokens out, %d steps, %d buffers, arena %s (%d bytes), weights %s (%d bytes, %d tensors, %s), blob %q",
			v.Rows, v.Tokens, v.Steps, v.Buffers, Human(v.Bytes), v.Bytes, Human(v.Weights), v.Weights, v.Tensors, v.Storage, v.Blob)
	}
	if m.MTP != nil {
		for _, r := range m.MTP.Plans {
			row(fmt.Sprintf("  mtp AR-%d", r.ARLen), "multi-token-prediction draft head (run --draft mtp)\tblob %q", r.Blob)
		}
	}
	if len(s.Adapters) > 0 {
		fmt.Fprintf(tw, "adapters:\n")
		for _, a := range s.Adapters {
			row("  "+a.Name, "LoRA from %s at scale %g: %d linears, rank %d, %s (%d bytes)\tblob %q (run --lora %s, serve's MODEL:%s)",
				a.Source, a.Scale, a.Linears, a.Rank, Human(a.Bytes), a.Bytes, a.Blob, a.Name, a.Name)
		}
	}
	fmt.Fprintf(tw, "sizes:\n")
	row("  file", "%s\t%d bytes", Human(s.File), s.File)
	for _, c := range sortedKeys(s.Tensors) {
		label := "  tensors " + c
		if n := s.TensorCount[c]; n > 0 {
			label = fmt.Sprintf("  tensors %s (%d)", c, n)
		}
		row(label, "%s\t%d bytes", Human(s.Tensors[c]), s.Tensors[c])
	}
	for _, k := range sortedKeys(s.Sections) {
		row("  section "+k, "%s\t%d bytes", Human(s.Sections[k]), s.Sections[k])
	}
	row("  params", "%s\t%d", HumanCount(s.Params), s.Params)
	if kv := s.KV; kv.ElemBytes == 0 {
		row("  KV cache", "%s\t%d bytes = %d layers x %d slots of 4-bit key/value head rows (codes, a step and an offset per group of up to 32 values)",
			Human(kv.Bytes), kv.Bytes, kv.Layers, kv.Ctx)
	} else if kv.WindowLayers > 0 {
		row("  KV cache", "%s\t%d bytes = (%d layers x %d ctx + %d sliding-window layers x %d ring slots) x %d cols x 2 x %d B",
			Human(kv.Bytes), kv.Bytes, kv.Layers-kv.WindowLayers, kv.Ctx, kv.WindowLayers, kv.WindowSlots, kv.Cols, kv.ElemBytes)
	} else {
		row("  KV cache", "%s\t%d bytes = %d layers x %d ctx x %d cols x 2 x %d B",
			Human(kv.Bytes), kv.Bytes, kv.Layers, kv.Ctx, kv.Cols, kv.ElemBytes)
	}
	row("  KV per token", "%s\t%d bytes (keys and values of every layer)", Human(s.KV.TokenBytes), s.KV.TokenBytes)
	for _, a := range s.Arenas {
		row(fmt.Sprintf("  arena AR-%d", a.ARLen), "%s\t%d bytes", Human(a.Bytes), a.Bytes)
	}
	if s.State > 0 {
		row("  recurrent state", "%s\t%d bytes x %d sets (the state cache within its %s budget: the last pass boundaries, for rewinding)",
			Human(s.State*int64(s.StateSets)), s.State, s.StateSets, Human(s.StateBudget))
		if s.ConvWindow > 0 {
			row("  conv window", "%s\t%d bytes (causal_conv inputs of the last positions, for rewinding inside a pass)", Human(s.ConvWindow), s.ConvWindow)
		}
		row("  per session", "%s\t%d bytes (KV cache + largest arena + state memory)", Human(s.Session), s.Session)
	} else {
		row("  per session", "%s\t%d bytes (KV cache + largest arena)", Human(s.Session), s.Session)
	}
	for _, v := range s.Vision {
		row("  "+v.Name+" weights", "%s\t%d bytes%s", Human(v.Weights), v.Weights, layoutSplit(v.Layouts))
		row("  "+v.Name+" arena", "%s\t%d bytes (per image encoder)", Human(v.Bytes), v.Bytes)
	}
	return tw.Flush()
}

// layoutSplit renders a vision plan's weight bytes by storage, as
// " (f16-rows 1.50 MiB, f32 3.00 KiB)", or "" when there is none.
func layoutSplit(l map[string]int64) string {
	if len(l) == 0 {
		return ""
	}
	s := ""
	for _, k := range sortedKeys(l) {
		if s != "" {
			s += ", "
		}
		s += k + " " + Human(l[k])
	}
	return " (" + s + ")"
}

// compact renders a manifest value on one line.
func compact(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	var buf bytes.Buffer
	if json.Compact(&buf, b) != nil {
		return string(b)
	}
	return buf.String()
}

// Human formats a byte count with a binary unit ("1.50 MiB").
func Human(b int64) string {
	const unit = 1024
	if b < unit {
		return fmt.Sprintf("%d B", b)
	}
	v, i := float64(b), -1
	for v >= unit && i < 5 {
		v /= unit
		i++
	}
	return fmt.Sprintf("%.2f %ciB", v, "KMGTPE"[i])
}

// HumanCount formats a count with a decimal unit, as llama-bench prints
// parameter counts ("260.10 K", "1.24 B").
func HumanCount(n int64) string {
	switch v := float64(n); {
	case v >= 1e9:
		return fmt.Sprintf("%.2f B", v/1e9)
	case v >= 1e6:
		return fmt.Sprintf("%.2f M", v/1e6)
	case v >= 1e3:
		return fmt.Sprintf("%.2f K", v/1e3)
	}
	return fmt.Sprintf("%d", n)
}

// Report is the outcome of a benchmark run, as `aotlm bench` prints it.
type Report struct {
	Model        string  `json:"model"` // artifact file name
	Architecture string  `json:"architecture"`
	Adapter      string  `json:"adapter,omitempty"` // the run-time adapter the tests applied
	Weights      string  `json:"weights"`
	SizeBytes    int64   `json:"size_bytes"`
	Params       int64   `json:"params"`
	Ctx          int     `json:"ctx"`
	Mode         string  `json:"mode"`
	Threads      int     `json:"threads"`
	LoadMs       float64 `json:"load_ms"`               // opening the artifact
	HugePages    bool    `json:"huge_pages,omitempty"`  // --hugepages put the weights in huge pages
	HugePagesPct float64 `json:"huge_pages_pct"`        // share of the file mapped with huge pages after the tests
	DecodeWalk   string  `json:"decode_walk,omitempty"` // the one-token products' walk (kernel.TuneOnce)
	Kernels      string  `json:"kernels,omitempty"`     // the kernel overlays in use (kernel.Active)
	Note         string  `json:"note,omitempty"`        // advice on the run (huge pages)
	TTFTMs       float64 `json:"ttft_ms"`               // of the largest pp test; 0 without one
	TTFTTest     string  `json:"ttft_test,omitempty"`
	RSSMB        float64 `json:"rss_mb"` // peak resident MiB at the end
	// DecodeBytes is, with Config.Floor, the weight bytes a decode step
	// streams (engine.DecodeWeights): the floor's numerator.
	DecodeBytes int64    `json:"decode_weight_bytes,omitempty"`
	Tests       []Result `json:"tests"`
}

// SetTTFT fills TTFTMs and TTFTTest from the pp test with the longest
// prompt among r.Tests.
func (r *Report) SetTTFT() {
	best := -1
	for i, t := range r.Tests {
		if t.Gen == 0 && (best < 0 || t.Prompt > r.Tests[best].Prompt) {
			best = i
		}
	}
	if best >= 0 {
		r.TTFTMs, r.TTFTTest = r.Tests[best].TTFTMs, r.Tests[best].Name
	}
}

// WriteTable prints the results as llama-bench's markdown table, then the
// load time, time to first token and peak RSS.
func (r Report) WriteTable(w io.Writer) error {
	model := r.Architecture + " " + r.Weights
	fmt.Fprintf(w, "| %-16s | %10s | %10s | %7s | %6s | %12s | %20s |\n", "model", "size", "params", "threads", "mode", "test", "t/s")
	fmt.Fprintf(w, "| %s | %s: | %s: | %s: | %s | %s: | %s: |\n", dashes(16), dashes(9), dashes(9), dashes(6), dashes(6), dashes(11), dashes(19))
	for _, t := range r.Tests {
		ts := fmt.Sprintf("%.2f ± %.2f", t.TokS, t.Stddev)
		fmt.Fprintf(w, "| %-16s | %10s | %10s | %7d | %6s | %12s | %20s |\n",
			model, Human(r.SizeBytes), HumanCount(r.Params), r.Threads, r.Mode, t.Name, ts)
	}
	fmt.Fprintf(w, "\nload %.2f ms", r.LoadMs)
	if r.HugePages {
		fmt.Fprint(w, " (weights put in huge pages)")
	}
	if r.TTFTTest != "" {
		fmt.Fprintf(w, ", time to first token (%s) %.2f ms", r.TTFTTest, r.TTFTMs)
	}
	fmt.Fprintf(w, ", peak RSS %.1f MiB, in huge pages %.0f%%", r.RSSMB, r.HugePagesPct)
	if r.Kernels != "" {
		fmt.Fprintf(w, ", kernels %s", r.Kernels)
	}
	if r.DecodeWalk != "" && r.DecodeWalk != "fixed" {
		fmt.Fprintf(w, ", decode walk %s", r.DecodeWalk)
	}
	_, err := fmt.Fprintln(w)
	for _, t := range r.Tests {
		if err == nil && t.FloorTokS > 0 {
			kv := ""
			if t.FloorKVBytes > 0 {
				kv = " + " + Human(t.FloorKVBytes) + " of KV cache"
			}
			_, err = fmt.Fprintf(w, "decode floor (%s): %s of weights%s a token, read at %.2f GB/s with %s: %.2f tok/s; decode at %.0f%% of it\n",
				t.Name, Human(r.DecodeBytes), kv, t.FloorGBps, plural(r.Threads, "thread"), t.FloorTokS, 100*t.OfFloor)
			if err == nil && t.MemoryTokS > 0 {
				_, err = fmt.Fprintf(w, "  from memory (evicted from the caches first): %.2f GB/s: %.2f tok/s; decode at %.0f%% of it\n",
					t.MemoryGBps, t.MemoryTokS, 100*t.OfMemory)
			}
		}
	}
	if err == nil && r.Note != "" {
		_, err = fmt.Fprintf(w, "note: %s\n", r.Note)
	}
	return err
}

// dashes returns n hyphens.
func dashes(n int) string { return string(bytes.Repeat([]byte{'-'}, n)) }

// plural returns "1 thread", "2 threads".
func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}
