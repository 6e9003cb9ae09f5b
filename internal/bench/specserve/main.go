// Command specserve measures speculative decoding inside a running
// `aotlm serve`: it sends the same greedy completions with
// "speculative": {"type": "none"} (plain decoding) and {"type": "lookup"}
// (prompt lookup), interleaved round by round, one and two requests at a
// time, and prints per round the wall time of each mode, the ratio of
// plain's time to speculation's, and what usage.speculative reports; then
// the medians. With -pid (the server's process id on this machine) it also
// sums the CPU time the server's threads ran in each mode from
// /proc/PID/task/*/schedstat, the steadier measure on a busy machine. The
// texts of both modes must be equal: it exits with status 1 otherwise.
//
// Two kinds of prompt are cut from a text file (the held-out part of the
// text a model was trained on, say):
//
//	grounded  a passage, a blank line, then the passage's first sentences
//	          again: the continuation quotes the passage, which prompt
//	          lookup finds in the prompt;
//	free      the passage's first sentences alone: nothing to quote, and
//	          the adaptive fallback should keep plain decoding's speed.
//
// Usage:
//
//	go run ./internal/bench/specserve [-offset N] [-rounds R] [-tokens T] [-pid PID] URL TEXT
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// speculative is the part of a completion's usage this command reads.
type speculative struct {
	TokensPerPass  float64 `json:"tokens_per_pass"`
	AcceptanceRate float64 `json:"acceptance_rate"`
	Fallbacks      int     `json:"fallbacks"`
}

type completion struct {
	Choices []struct {
		Text string `json:"text"`
	} `json:"choices"`
	Usage struct {
		Speculative *speculative `json:"speculative"`
	} `json:"usage"`
}

func complete(url, prompt string, tokens int, spec string) (*completion, error) {
	body, _ := json.Marshal(map[string]any{"prompt": prompt, "max_tokens": tokens, "temperature": 0,
		"ignore_eos": true, "speculative": map[string]string{"type": spec}})
	resp, err := http.Post(url+"/v1/completions", "application/json", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s", resp.Status, strings.TrimSpace(string(b)))
	}
	var c completion
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("the server's reply: %w", err)
	}
	if len(c.Choices) == 0 {
		return nil, fmt.Errorf("the server's reply has no choices")
	}
	return &c, nil
}

// cpuNanos sums the nanoseconds the threads of process pid ran on a CPU
// (0 without a pid).
func cpuNanos(pid int) int64 {
	if pid == 0 {
		return 0
	}
	files, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
	var total int64
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue // a thread that ended meanwhile
		}
		if fields := strings.Fields(string(b)); len(fields) > 0 {
			n, _ := strconv.ParseInt(fields[0], 10, 64)
			total += n
		}
	}
	return total
}

// together sends one request per prompt at the same time and returns the
// wall time and the answers.
func together(url string, prompts []string, tokens int, spec string) (time.Duration, []*completion, error) {
	out := make([]*completion, len(prompts))
	errs := make([]error, len(prompts))
	var wg sync.WaitGroup
	start := time.Now()
	for i, p := range prompts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i], errs[i] = complete(url, p, tokens, spec)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return 0, nil, err
		}
	}
	return time.Since(start), out, nil
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func main() {
	offset := flag.Int("offset", 0, "character offset of the first passage in TEXT")
	rounds := flag.Int("rounds", 11, "interleaved rounds per case")
	tokens := flag.Int("tokens", 300, "tokens per request")
	chars := flag.Int("chars", 250, "characters of a passage")
	pid := flag.Int("pid", 0, "the server's process id, to read its CPU time")
	flag.Usage = func() {
		fmt.Fprintln(flag.CommandLine.Output(), "usage: specserve [flags] URL TEXT")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 2 || *rounds < 1 || *tokens < 1 || *chars < 8 || *offset < 0 {
		flag.Usage()
		os.Exit(2)
	}
	url, textPath := strings.TrimRight(flag.Arg(0), "/"), flag.Arg(1)
	if err := run(url, textPath, *offset, *rounds, *tokens, *chars, *pid); err != nil {
		fmt.Fprintln(os.Stderr, "specserve:", err)
		os.Exit(1)
	}
}

func run(url, textPath string, offset, rounds, tokens, chars, pid int) error {
	raw, err := os.ReadFile(textPath)
	if err != nil {
		return err
	}
	text := []rune(string(raw))
	if offset+2*chars > len(text) {
		return fmt.Errorf("%s: %d characters, too short for two passages of %d at offset %d", textPath, len(text), chars, offset)
	}
	passages := []string{string(text[offset : offset+chars]), string(text[offset+chars : offset+2*chars])}
	heads := make([]string, 2)
	grounded := make([]string, 2)
	for i, p := range passages {
		heads[i] = string([]rune(p)[:chars/4])
		grounded[i] = p + "\n\n" + heads[i]
		// the passages' text into the server's cache before the first round
		if _, err := complete(url, grounded[i], 1, "none"); err != nil {
			return err
		}
	}
	failed := false
	for _, kind := range []struct {
		name    string
		prompts []string
	}{{"grounded", grounded}, {"free", heads}} {
		for n := 1; n <= 2; n++ {
			var speed, cpu, tpp, acc []float64
			for r := range rounds {
				order := []string{"none", "lookup"}
				if r%2 == 1 {
					order = []string{"lookup", "none"}
				}
				times, used := map[string]time.Duration{}, map[string]int64{}
				texts := map[string][]string{}
				var sp []*speculative
				for _, spec := range order {
					c0 := cpuNanos(pid)
					d, answers, err := together(url, kind.prompts[:n], tokens, spec)
					if err != nil {
						return err
					}
					times[spec], used[spec] = d, cpuNanos(pid)-c0
					for _, a := range answers {
						texts[spec] = append(texts[spec], a.Choices[0].Text)
						if spec == "lookup" {
							sp = append(sp, cmpOr(a.Usage.Speculative))
						}
					}
				}
				if !slices.Equal(texts["none"], texts["lookup"]) {
					fmt.Fprintf(os.Stderr, "%s, %d at a time, round %d: the texts differ\n", kind.name, n, r)
					failed = true
				}
				var t, a float64
				fb := 0
				for _, s := range sp {
					t += s.TokensPerPass
					a += s.AcceptanceRate
					fb += s.Fallbacks
				}
				tpp, acc = append(tpp, t/float64(len(sp))), append(acc, a/float64(len(sp)))
				speed = append(speed, times["none"].Seconds()/times["lookup"].Seconds())
				c := 0.0
				if used["lookup"] > 0 {
					c = float64(used["none"]) / float64(used["lookup"])
				}
				cpu = append(cpu, c)
				fmt.Printf("%-8s x%d round %d: plain %.3fs, lookup %.3fs, speed %.2fx, CPU %.2fx, %.2f tokens/pass, %.0f%% accepted, %d fallbacks\n",
					kind.name, n, r, times["none"].Seconds(), times["lookup"].Seconds(), speed[len(speed)-1], c, tpp[len(tpp)-1], 100*acc[len(acc)-1], fb)
			}
			fmt.Printf("%-8s x%d median: speed %.2fx plain, CPU %.2fx, %.2f tokens/pass, %.0f%% accepted\n",
				kind.name, n, median(speed), median(cpu), median(tpp), 100*median(acc))
		}
	}
	if failed {
		return fmt.Errorf("speculative and plain texts differ")
	}
	return nil
}

// cmpOr gives a report with one token per pass when the server sent none.
func cmpOr(s *speculative) *speculative {
	if s == nil {
		return &speculative{TokensPerPass: 1}
	}
	return s
}
