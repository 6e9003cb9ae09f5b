"""Re-render the golden files with Python's jinja2, as Hugging Face does.

Usage: python3 crosscheck.py <shared testdata folder>   (run from this folder)

Hugging Face transformers renders chat templates in a sandboxed jinja2
environment with trim_blocks and lstrip_blocks, the loopcontrols extension,
a tojson filter (json.dumps with ensure_ascii=False) and the globals
raise_exception and strftime_now. This script builds the same environment,
renders the conversations of golden_test.go and reports every golden file
that differs. It needs only jinja2 (no transformers) and is not run by
go test.
"""

import datetime
import json
import os
import sys

from jinja2.exceptions import TemplateError
from jinja2.sandbox import ImmutableSandboxedEnvironment

NOW = datetime.datetime(2024, 7, 26, 12, 0, 0)

SYS = "You are a helpful assistant."
U1 = "Hello, how are you?"
A1 = "I'm doing great. How can I help you today?"
U2 = "I'd like to show off how chat templating works!"
A2 = "Sure: this is the second answer."

CASES = {
    "user": ([("user", U1)], True, {}),
    "system-user-assistant-user": ([("system", SYS), ("user", U1), ("assistant", A1), ("user", U2)], True, {}),
    "user-assistant-user": ([("user", U1), ("assistant", A1), ("user", U2)], True, {}),
    "multi-turn-nogen": ([("user", U1), ("assistant", A1), ("user", U2), ("assistant", A2)], False, {}),
    "user-nothink": ([("user", U1)], True, {"enable_thinking": False}),
}

TEMPLATES = [
    ("qwen2.5", "tokenizers/qwen2.5/tokenizer_config.json", ["user", "system-user-assistant-user", "multi-turn-nogen"]),
    ("qwen3", "tokenizers/qwen3/tokenizer_config.json", ["user", "system-user-assistant-user", "multi-turn-nogen", "user-nothink"]),
    ("qwen3.8", "chat-templates/qwen3.8.chat_template.jinja", ["user", "system-user-assistant-user", "multi-turn-nogen", "user-nothink"]),
    ("llama3.2", "tokenizers/llama3.2/tokenizer_config.json", ["user", "system-user-assistant-user", "multi-turn-nogen"]),
    ("gemma2", "tokenizers/gemma2/tokenizer_config.json", ["user", "user-assistant-user", "multi-turn-nogen"]),
    ("gemma3", "tokenizers/gemma3/tokenizer_config.json", ["user", "system-user-assistant-user", "multi-turn-nogen"]),
    ("phi3.5", "tokenizers/phi3.5/tokenizer_config.json", ["user", "system-user-assistant-user", "multi-turn-nogen"]),
    ("phi4-mini", "tokenizers/phi4-mini/tokenizer_config.json", ["user", "system-user-assistant-user", "multi-turn-nogen"]),
]


def raise_exception(message):
    raise TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def token(v):
    if isinstance(v, dict):
        return v.get("content")
    return v


def main():
    root = sys.argv[1]
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: NOW.strftime(fmt)
    bad = 0
    for name, rel, cases in TEMPLATES:
        path = os.path.join(root, rel)
        specials = {}
        if rel.endswith(".jinja"):
            src = open(path, encoding="utf-8").read()
        else:
            cfg = json.load(open(path, encoding="utf-8"))
            src = cfg["chat_template"]
            for k in ("bos_token", "eos_token"):
                if token(cfg.get(k)):
                    specials[k] = token(cfg.get(k))
        tmpl = env.from_string(src)
        for case in cases:
            msgs, gen, extra = CASES[case]
            out = tmpl.render(messages=[{"role": r, "content": c} for r, c in msgs],
                              add_generation_prompt=gen, **specials, **extra)
            golden = open(os.path.join("golden", f"{name}-{case}.txt"), encoding="utf-8").read()
            status = "ok" if out == golden else "DIFFERS"
            if out != golden:
                bad += 1
                print(f"{name}-{case}: jinja2 {out!r}\n  golden {golden!r}")
            print(f"{status} {name}-{case}")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
