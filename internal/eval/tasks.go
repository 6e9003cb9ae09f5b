package eval

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/aotlm/aotlm/internal/kernel"
)

// Encoder tokenizes a text with the model's special-token rule (BOS first
// where the model adds one), as llama.cpp's common_tokenize(text, true).
type Encoder func(text string) []int

// MCTask is one multiple-choice item: a context, its endings, and the index
// of the right one.
type MCTask struct {
	Context string
	Endings []string
	Gold    int
}

// ReadHellaSwag reads tasks in llama.cpp's hellaswag file format: 6 lines
// per task, the context, the gold ending's index (0..3), then the 4
// endings.
func ReadHellaSwag(r io.Reader) ([]MCTask, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<16), 1<<24)
	var lines []string
	for sc.Scan() {
		lines = append(lines, strings.TrimSuffix(sc.Text(), "\r"))
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("eval: hellaswag file: %w", err)
	}
	if len(lines) == 0 || len(lines)%6 != 0 {
		return nil, fmt.Errorf("eval: hellaswag file has %d lines, not a (non-zero) multiple of 6", len(lines))
	}
	tasks := make([]MCTask, 0, len(lines)/6)
	for i := 0; i < len(lines); i += 6 {
		gold, err := strconv.Atoi(strings.TrimSpace(lines[i+1]))
		if err != nil || gold < 0 || gold > 3 {
			return nil, fmt.Errorf("eval: hellaswag task %d (line %d): gold index %q is not 0..3", i/6+1, i+2, lines[i+1])
		}
		tasks = append(tasks, MCTask{Context: lines[i], Endings: append([]string(nil), lines[i+2:i+6]...), Gold: gold})
	}
	return tasks, nil
}

// MCItem is the score of one task.
type MCItem struct {
	Gold int
	// LogProb is the summed log-probability of each ending's tokens and
	// Tokens their count.
	LogProb []float64
	Tokens  []int
	// Pred is the ending with the highest summed log-probability,
	// PredNorm the one with the highest mean (llama.cpp's acc_norm).
	Pred, PredNorm int
}

// MCResult is the accuracy over a set of multiple-choice tasks.
type MCResult struct {
	Tasks   int
	Acc     float64 // by summed log-likelihood
	AccNorm float64 // by mean log-likelihood per token, as llama-perplexity --hellaswag
	Items   []MCItem
}

// MultipleChoice scores each task as llama-perplexity --hellaswag does:
// every ending is tokenized as enc(context + " " + ending), the tokens the
// four sequences share from the start are the common prefix, and an
// ending's score is the log-probability of its tokens after that prefix
// (its first token predicted by the prefix's last row). Acc picks the
// highest sum, AccNorm the highest mean; ties go to the first ending.
func MultipleChoice(s Session, enc Encoder, tasks []MCTask) (MCResult, error) {
	res := MCResult{Tasks: len(tasks)}
	if len(tasks) == 0 {
		return res, errors.New("eval: no tasks")
	}
	ctx := math.MaxInt
	if c, ok := s.(interface{ Context() int }); ok {
		ctx = c.Context()
	}
	var acc, accNorm int
	for ti, t := range tasks {
		if len(t.Endings) == 0 || t.Gold < 0 || t.Gold >= len(t.Endings) {
			return res, fmt.Errorf("eval: task %d: gold %d with %d endings", ti+1, t.Gold, len(t.Endings))
		}
		seqs := make([][]int, len(t.Endings))
		for e, end := range t.Endings {
			seqs[e] = enc(t.Context + " " + end)
		}
		prefix := commonPrefix(seqs)
		if prefix == 0 {
			return res, fmt.Errorf("eval: task %d: the endings share no first token (no context to predict from)", ti+1)
		}
		it := MCItem{Gold: t.Gold, LogProb: make([]float64, len(seqs)), Tokens: make([]int, len(seqs))}
		for e, seq := range seqs {
			if len(seq) <= prefix {
				return res, fmt.Errorf("eval: task %d: ending %d adds no token to the context", ti+1, e)
			}
			if len(seq) > ctx {
				return res, fmt.Errorf("eval: task %d: ending %d needs %d tokens, the context holds %d", ti+1, e, len(seq), ctx)
			}
			rows, err := logits(s, seq)
			if err != nil {
				return res, fmt.Errorf("eval: task %d, ending %d: %w", ti+1, e, err)
			}
			for j := prefix - 1; j < len(seq)-1; j++ {
				nll, err := NLL(rows[j], seq[j+1])
				if err != nil {
					return res, fmt.Errorf("eval: task %d, ending %d: %w", ti+1, e, err)
				}
				it.LogProb[e] -= nll
				it.Tokens[e]++
			}
		}
		for e := range seqs {
			if it.LogProb[e] > it.LogProb[it.Pred] {
				it.Pred = e
			}
			if it.LogProb[e]/float64(it.Tokens[e]) > it.LogProb[it.PredNorm]/float64(it.Tokens[it.PredNorm]) {
				it.PredNorm = e
			}
		}
		if it.Pred == t.Gold {
			acc++
		}
		if it.PredNorm == t.Gold {
			accNorm++
		}
		res.Items = append(res.Items, it)
	}
	res.Acc = float64(acc) / float64(len(tasks))
	res.AccNorm = float64(accNorm) / float64(len(tasks))
	return res, nil
}

// commonPrefix returns how many leading tokens all sequences share.
func commonPrefix(seqs [][]int) int {
	n := 0
	for {
		for _, s := range seqs {
			if n >= len(s) || s[n] != seqs[0][n] {
				return n
			}
		}
		n++
	}
}

// LambadaItem is one LAMBADA passage split into its context and its last
// word (with the space before it).
type LambadaItem struct {
	Context, Target string
}

// ReadLambada reads LAMBADA jsonl ({"text": ...} per line) and splits each
// passage at its last space, as the LAMBADA task of lm-evaluation-harness
// does: the context, and " " + the last word.
func ReadLambada(r io.Reader) ([]LambadaItem, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<16), 1<<24)
	var out []LambadaItem
	for line := 1; sc.Scan(); line++ {
		b := strings.TrimSpace(sc.Text())
		if b == "" {
			continue
		}
		var rec struct {
			Text *string `json:"text"`
		}
		if err := json.Unmarshal([]byte(b), &rec); err != nil {
			return nil, fmt.Errorf("eval: lambada line %d: %w", line, err)
		}
		if rec.Text == nil {
			return nil, fmt.Errorf("eval: lambada line %d: no \"text\" field", line)
		}
		i := strings.LastIndexByte(*rec.Text, ' ')
		if i <= 0 || i == len(*rec.Text)-1 {
			return nil, fmt.Errorf("eval: lambada line %d: no last word after a space", line)
		}
		out = append(out, LambadaItem{Context: (*rec.Text)[:i], Target: (*rec.Text)[i:]})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("eval: lambada file: %w", err)
	}
	if len(out) == 0 {
		return nil, errors.New("eval: lambada file has no passages")
	}
	return out, nil
}

// LambadaResult is LAMBADA's last-word accuracy and perplexity.
type LambadaResult struct {
	Items int
	// Acc is the share of passages whose last word the model predicts
	// greedily, every one of its tokens the argmax.
	Acc float64
	// PPL is exp of the mean over passages of the last word's negative
	// log-likelihood (summed over its tokens), lm-evaluation-harness's
	// LAMBADA perplexity.
	PPL float64
}

// Lambada scores each item: the target's tokens are those of
// enc(context + target) after the tokens of enc(context) (as
// lm-evaluation-harness splits them); they are predicted from the rows
// before them in one pass.
func Lambada(s Session, enc Encoder, items []LambadaItem) (LambadaResult, error) {
	res := LambadaResult{Items: len(items)}
	if len(items) == 0 {
		return res, errors.New("eval: no passages")
	}
	ctx := sessionContext(s)
	var correct int
	var sum float64
	for i, it := range items {
		whole, n, err := lambadaTokens(enc, it, ctx, i)
		if err != nil {
			return res, err
		}
		rows, err := logits(s, whole)
		if err != nil {
			return res, fmt.Errorf("eval: passage %d: %w", i+1, err)
		}
		greedy := true
		for j := n - 1; j < len(whole)-1; j++ {
			nll, err := NLL(rows[j], whole[j+1])
			if err != nil {
				return res, fmt.Errorf("eval: passage %d: %w", i+1, err)
			}
			sum += nll
			if kernel.Argmax(rows[j]) != whole[j+1] {
				greedy = false
			}
		}
		if greedy {
			correct++
		}
	}
	res.Acc = float64(correct) / float64(len(items))
	res.PPL = math.Exp(sum / float64(len(items)))
	return res, nil
}

// sessionContext is the positions a session holds (unbounded when it
// does not say).
func sessionContext(s Session) int {
	if c, ok := s.(interface{ Context() int }); ok {
		return c.Context()
	}
	return math.MaxInt
}

// lambadaTokens tokenizes item i (0-based) for a session of ctx
// positions: the ids to run, and n, the number of them before the target
// (the target is whole[n:]).
func lambadaTokens(enc Encoder, it LambadaItem, ctx, i int) (whole []int, n int, err error) {
	whole = enc(it.Context + it.Target)
	n = len(enc(it.Context))
	if n < 1 || n >= len(whole) {
		return nil, 0, fmt.Errorf("eval: passage %d: the last word adds no token to the context", i+1)
	}
	if len(whole) > ctx {
		// keep the end: the last ctx tokens hold the target
		whole, n = whole[len(whole)-ctx:], n-(len(whole)-ctx)
		if n < 1 {
			return nil, 0, fmt.Errorf("eval: passage %d: the last word alone needs more than %d tokens", i+1, ctx)
		}
	}
	return whole, n, nil
}

// LambadaPhaseResult is the LAMBADA score of one phase of a model (see
// PhaseResult) and its distance from the first phase over the last words'
// tokens.
type LambadaPhaseResult struct {
	LambadaResult
	// Tokens is the number of target tokens scored (the same in every
	// phase), TokenPPL exp of their mean negative log-likelihood.
	Tokens   int
	TokenPPL float64
	// KL is the mean KL divergence from the first phase's distribution
	// over the target tokens, in nats; Top1 the share of them whose argmax
	// is the first phase's (llama-perplexity --kl-divergence's
	// definitions, restricted to the last words).
	KL   float64
	Top1 float64
}

// LambadaPhases scores the items with every session in turn, as Lambada
// does for one, and compares each session's distribution over the target
// tokens with the first one's. Each result's Acc and PPL equal what
// Lambada gives for that session alone.
func LambadaPhases(sessions []Session, enc Encoder, items []LambadaItem) ([]LambadaPhaseResult, error) {
	if len(sessions) == 0 {
		return nil, errors.New("eval: no phases to score")
	}
	if len(items) == 0 {
		return nil, errors.New("eval: no passages")
	}
	ctx := math.MaxInt
	for _, s := range sessions {
		ctx = min(ctx, sessionContext(s))
	}
	out := make([]LambadaPhaseResult, len(sessions))
	sum := make([]float64, len(sessions))
	correct := make([]int, len(sessions))
	kl := make([]float64, len(sessions))
	same := make([]int, len(sessions))
	logp := make([][]float64, len(sessions))
	tokens := 0
	for i, it := range items {
		whole, n, err := lambadaTokens(enc, it, ctx, i)
		if err != nil {
			return nil, err
		}
		rows := make([][][]float32, len(sessions))
		greedy := make([]bool, len(sessions))
		for p, s := range sessions {
			if rows[p], err = logits(s, whole); err != nil {
				return nil, fmt.Errorf("eval: phase %d, passage %d: %w", p+1, i+1, err)
			}
			greedy[p] = true
		}
		for j := n - 1; j < len(whole)-1; j++ {
			tokens++
			for p := range sessions {
				row := rows[p][j]
				if len(row) != len(rows[0][j]) {
					return nil, fmt.Errorf("eval: phase %d gives %d logits, phase 1 %d", p+1, len(row), len(rows[0][j]))
				}
				nll, err := NLL(row, whole[j+1])
				if err != nil {
					return nil, fmt.Errorf("eval: phase %d, passage %d: %w", p+1, i+1, err)
				}
				sum[p] += nll
				if kernel.Argmax(row) != whole[j+1] {
					greedy[p] = false
				}
				logp[p] = logSoftmax(logp[p], row)
			}
			top := argmax64(logp[0])
			for p := range sessions {
				kl[p] += klDiv(logp[0], logp[p])
				if argmax64(logp[p]) == top {
					same[p]++
				}
			}
		}
		for p := range sessions {
			if greedy[p] {
				correct[p]++
			}
		}
	}
	for p := range sessions {
		out[p] = LambadaPhaseResult{
			LambadaResult: LambadaResult{Items: len(items), Acc: float64(correct[p]) / float64(len(items)),
				PPL: math.Exp(sum[p] / float64(len(items)))},
			Tokens: tokens, TokenPPL: math.Exp(sum[p] / float64(tokens)),
			KL: kl[p] / float64(tokens), Top1: float64(same[p]) / float64(tokens),
		}
	}
	return out, nil
}
