#!/usr/bin/env python3
"""Speculative decoding in `aotlm serve`: speed and tokens per pass.

Sends the same completions to a running server with "speculative":
{"type": "none"} (plain decoding) and {"type": "lookup"} (prompt lookup),
interleaved round by round, with 1 and 2 requests at a time, and prints per
round the wall time of the requests, the speculative over plain speed ratio
and what usage.speculative reports; then the medians. With --pid (the
server's process id, on this machine) it also reads the CPU time the
server's threads ran for each mode (/proc/PID/task/*/schedstat), the steadier
measure on a busy machine: the CPU ratio is plain's over speculation's. Greedy decoding: the
texts of both modes must be equal (it exits with status 1 otherwise).

Two kinds of prompt, from a text file (the held-out part of the text a model
was trained on, say):
  grounded   a passage, a blank line, then the passage's first sentences
             again: the continuation quotes the passage, which prompt lookup
             finds in the prompt;
  free       the passage's first sentences alone: nothing to quote, guesses
             fail, and the adaptive fallback should keep the speed of plain
             decoding.

usage: spec_serve_bench.py URL TEXT [--offset N] [--rounds R] [--tokens T] [--pid PID]
"""
import argparse
import glob
import json
import statistics
import sys
import threading
import time
import urllib.request


def complete(url, prompt, tokens, spec):
    body = {"prompt": prompt, "max_tokens": tokens, "temperature": 0, "ignore_eos": True,
            "speculative": {"type": spec}}
    req = urllib.request.Request(url + "/v1/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req) as r:
        return json.load(r)


def cpu_ns(pid):
    """The nanoseconds the threads of process pid ran on a CPU (0 without pid)."""
    if not pid:
        return 0
    total = 0
    for f in glob.glob(f"/proc/{pid}/task/*/schedstat"):
        try:
            total += int(open(f).read().split()[0])
        except (OSError, ValueError, IndexError):
            pass  # a thread that ended meanwhile
    return total


def together(url, prompts, tokens, spec):
    """Runs one request per prompt at the same time; returns the wall time
    and the answers."""
    out = [None] * len(prompts)

    def one(i):
        out[i] = complete(url, prompts[i], tokens, spec)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(prompts))]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return time.perf_counter() - start, out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("url")
    ap.add_argument("text")
    ap.add_argument("--offset", type=int, default=0, help="character offset of the first passage in TEXT")
    ap.add_argument("--rounds", type=int, default=11)
    ap.add_argument("--tokens", type=int, default=300)
    ap.add_argument("--chars", type=int, default=250, help="characters of a passage")
    ap.add_argument("--pid", type=int, default=0, help="the server's process id, to read its CPU time")
    a = ap.parse_args()
    text = open(a.text, encoding="utf-8").read()[a.offset:]
    passages = [text[i * a.chars:(i + 1) * a.chars] for i in range(2)]
    heads = [p[:a.chars // 4] for p in passages]
    # the passages' text up to the server's cache before the first round
    for p, h in zip(passages, heads):
        complete(a.url, p + "\n\n" + h, 1, "none")
    kinds = {"grounded": [p + "\n\n" + h for p, h in zip(passages, heads)], "free": heads}
    failed = False
    for kind, prompts in kinds.items():
        for n in (1, 2):
            ratios, cpu, tpp, acc, fb = [], [], [], [], []
            for r in range(a.rounds):
                order = ["none", "lookup"] if r % 2 == 0 else ["lookup", "none"]
                times, texts, used = {}, {}, {}
                for spec in order:
                    c0 = cpu_ns(a.pid)
                    times[spec], answers = together(a.url, prompts[:n], a.tokens, spec)
                    used[spec] = cpu_ns(a.pid) - c0
                    texts[spec] = [x["choices"][0]["text"] for x in answers]
                    if spec == "lookup":
                        sp = [x["usage"].get("speculative") or {} for x in answers]
                        tpp.append(statistics.mean(s.get("tokens_per_pass", 1) for s in sp))
                        acc.append(statistics.mean(s.get("acceptance_rate", 0) for s in sp))
                        fb.append(sum(s.get("fallbacks", 0) for s in sp))
                if texts["none"] != texts["lookup"]:
                    print(f"{kind}, {n} at a time, round {r}: the texts differ", file=sys.stderr)
                    failed = True
                ratios.append(times["none"] / times["lookup"])
                cpu.append(used["none"] / used["lookup"] if used["lookup"] else 0)
                print(f"{kind:8s} x{n} round {r}: plain {times['none']:.3f}s, lookup {times['lookup']:.3f}s, "
                      f"speed {ratios[-1]:.2f}x, CPU {cpu[-1]:.2f}x, {tpp[-1]:.2f} tokens/pass, {100 * acc[-1]:.0f}% accepted, "
                      f"{fb[-1]} fallbacks")
            print(f"{kind:8s} x{n} median: speed {statistics.median(ratios):.2f}x plain, CPU {statistics.median(cpu):.2f}x, "
                  f"{statistics.median(tpp):.2f} tokens/pass, {100 * statistics.median(acc):.0f}% accepted")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
