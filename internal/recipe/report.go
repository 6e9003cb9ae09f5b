package recipe

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/aotlm/aotlm/internal/qmodel"
)

// WriteReport prints a quantization's report: a tensor a row (scheme,
// relative RMS error, bits per weight, what was padded or kept in float),
// then the totals.
func WriteReport(w io.Writer, rep *qmodel.Report) error {
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "tensor\tshape\tscheme\trel rmse\tbits/w\tnote")
	for _, t := range rep.Tensors {
		note := t.Fallback
		if t.Padded {
			note = "last block padded"
		}
		if t.Outliers > 0 {
			note = strings.TrimPrefix(note+fmt.Sprintf("; %d outlier channels in float", t.Outliers), "; ")
		}
		fmt.Fprintf(tw, "%s\t%v\t%s\t%.4f\t%.2f\t%s\n", terminalSafe(t.Name), t.Shape, t.Scheme, t.RelErr, t.Bits, note)
	}
	tw.Flush()
	_, err := fmt.Fprintf(w, "%d parameters, %.2f bits per weight, written to %s\n", rep.Params, rep.WeightBits, rep.Output)
	return err
}

// WriteSensitivity prints Sensitivity's rows as a table, basePPL the
// float model's perplexity.
func WriteSensitivity(w io.Writer, rows []Row, basePPL float64) error {
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "tensor\tscheme\tKL alone\tPPL alone (float %.4f)\tsame top-1\n", basePPL)
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%.6f\t%.4f\t%.2f%%\n", r.Name, r.Scheme, r.KL, r.PPL, 100*r.Top1)
	}
	return tw.Flush()
}

// terminalSafe returns name as is when it is plain printable text, and
// quoted with Go escapes otherwise, so a name from a checkpoint cannot move
// the cursor, recolour or clear the terminal.
func terminalSafe(name string) string {
	if q := strconv.Quote(name); q[1:len(q)-1] == name {
		return name
	}
	return strconv.Quote(name)
}
