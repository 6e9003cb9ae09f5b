package score

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/aotlm/aotlm"
	"github.com/aotlm/aotlm/internal/eval"
	"github.com/aotlm/aotlm/internal/load"
	"github.com/aotlm/aotlm/internal/modelparts"
	"github.com/aotlm/aotlm/internal/tokenizer"
	"github.com/aotlm/aotlm/internal/userfile"
)

// Model names the model scored and how it runs: a checkpoint through the
// graph interpreter, an artifact through the runtime.
type Model struct {
	Path      string
	Tokenizer string // a tokenizer file or folder replacing the model's
	Threads   int
	Mode      string // an artifact's prefill: "hybrid" (the default) or "kv"
}

// openRuntime opens m as the runtime sees it.
func (m Model) openRuntime() (*aotlm.Model, error) {
	return load.Open(m.Path, load.Options{Tokenizer: m.Tokenizer, Threads: m.Threads, Mode: m.Mode, NoCompile: true})
}

// open opens m, refusing a model without a tokenizer.
func (m Model) open() (*aotlm.Model, error) {
	rm, err := m.openRuntime()
	if err != nil {
		return nil, err
	}
	if rm.Tokenizer() == nil {
		rm.Close()
		return nil, fmt.Errorf("%s has no tokenizer: pass --tokenizer <file>", m.Path)
	}
	return rm, nil
}

// TextOptions say how a text is scored: in chunks of Ctx tokens by
// llama.cpp's rule, or with Stride in sliding windows of Ctx tokens
// (eval.Options); at most Chunks of them (0: all). Progress, when not
// nil, is called after each with the number done, the total and the
// perplexity so far.
type TextOptions struct {
	Ctx, Stride, Chunks int
	Progress            func(done, total int, ppl float64)
}

func (o TextOptions) eval() eval.Options {
	return eval.Options{Ctx: o.Ctx, Stride: o.Stride, MaxChunks: o.Chunks, Progress: o.Progress}
}

// Text scores text with m as o says (o.Ctx positions, which the model
// must have).
func Text(ctx context.Context, m Model, text string, o TextOptions) (eval.Result, error) {
	opts := o.eval()
	rm, err := m.open()
	if err != nil {
		return eval.Result{}, err
	}
	defer rm.Close()
	if opts.Ctx > rm.Info().Context {
		return eval.Result{}, fmt.Errorf("--ctx %d exceeds the model's context of %d tokens", opts.Ctx, rm.Info().Context)
	}
	rs, err := rm.NewSession(opts.Ctx)
	if err != nil {
		return eval.Result{}, err
	}
	defer rs.Close()
	return eval.PerplexityText(Scorer(ctx, rs), modelparts.Tokenizer(rm), text, opts)
}

// Logits returns the logits of every position of ids fed to m from
// position 0: row i holds the logits after ids[0..i]. Ids outside the
// vocabulary and sequences past the context are refused.
func Logits(ctx context.Context, m Model, ids []int) ([][]float32, error) {
	rm, err := m.openRuntime()
	if err != nil {
		return nil, err
	}
	defer rm.Close()
	vocab := rm.Info().Vocab
	for i, id := range ids {
		if id < 0 || id >= vocab {
			return nil, fmt.Errorf("--ids: id %d (position %d) is outside the vocabulary [0, %d)", id, i, vocab)
		}
	}
	if len(ids) > rm.Info().Context {
		return nil, fmt.Errorf("--ids: %d ids, the model's context holds %d", len(ids), rm.Info().Context)
	}
	s, err := rm.NewSession(len(ids))
	if err != nil {
		return nil, err
	}
	defer s.Close()
	return s.Logits(ctx, ids)
}

// Tasks names the benchmark tasks Task scores.
var Tasks = []string{"lambada", "hellaswag", "multiple-choice"}

// TaskResult is what Task gives: Lambada for the lambada task, Choices
// for the others.
type TaskResult struct {
	Lambada *eval.LambadaResult
	Choices *eval.MCResult
}

// Task scores m on the first limit items (0: all) of the task file f,
// with a context of positions (0 or past the model's: the model's).
func Task(ctx context.Context, m Model, task string, f *os.File, limit, positions int) (TaskResult, error) {
	rm, err := m.open()
	if err != nil {
		return TaskResult{}, err
	}
	defer rm.Close()
	if positions <= 0 || positions > rm.Info().Context {
		positions = rm.Info().Context
	}
	rs, err := rm.NewSession(positions)
	if err != nil {
		return TaskResult{}, err
	}
	defer rs.Close()
	s := Scorer(ctx, rs)
	tok := modelparts.Tokenizer(rm)
	enc := func(text string) []int {
		return tok.Encode(text, tokenizer.EncodeOptions{AddSpecial: true})
	}
	if task == "lambada" {
		items, err := ReadLambada(f, limit)
		if err != nil {
			return TaskResult{}, err
		}
		r, err := eval.Lambada(s, enc, items)
		return TaskResult{Lambada: &r}, err
	}
	var tasks []eval.MCTask
	if task == "hellaswag" {
		tasks, err = eval.ReadHellaSwag(f)
	} else {
		var data []byte
		if data, err = userfile.ReadFile(f.Name(), userfile.Text.Named("multiple-choice file")); err == nil {
			tasks, err = eval.ReadMultipleChoice(data)
		}
	}
	if err != nil {
		return TaskResult{}, err
	}
	if limit > 0 && limit < len(tasks) {
		tasks = tasks[:limit]
	}
	r, err := eval.MultipleChoice(s, enc, tasks)
	return TaskResult{Choices: &r}, err
}

// ReadLambada reads the first limit (0: all) LAMBADA items of r.
func ReadLambada(r io.Reader, limit int) ([]eval.LambadaItem, error) {
	items, err := eval.ReadLambada(r)
	if err != nil {
		return nil, err
	}
	if limit > 0 && limit < len(items) {
		items = items[:limit]
	}
	return items, nil
}

// Scorer returns a runtime session as the eval package scores it, its
// passes checking ctx.
func Scorer(ctx context.Context, s *aotlm.Session) eval.Session { return scorer{ctx: ctx, s: s} }

// scorer is a runtime session as the eval package scores it.
type scorer struct {
	ctx context.Context
	s   *aotlm.Session
}

func (x scorer) Reset()       { x.s.Reset() }
func (x scorer) Context() int { return x.s.Context() }
func (x scorer) Logits(ids []int) ([][]float32, error) {
	return x.s.Logits(x.ctx, ids)
}
