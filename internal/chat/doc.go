// Package chat renders a model's chat template: the Jinja program in
// tokenizer_config.json ("chat_template", a string or a list of
// {"name", "template"} of which "default" is used) or in a separate
// chat_template.jinja, which turns a list of messages into the prompt text
// the model was trained on.
//
// It owns parsing (Parse, Load, FromTokenizerConfig), rendering
// (Template.Render with Options), the special tokens the config declares
// (Specials) and reading a messages file (Messages). Tool definitions
// reach a template only as the caller's Options.Vars["tools"] (aotlm
// serve passes a request's tools so); without it `tools` is undefined and
// templates take their no-tools branch.
//
// # Engine and compatibility with Hugging Face
//
// Templates run on github.com/nikolalohinski/gonja/v2, configured as Hugging
// Face transformers configures jinja2: trim_blocks and lstrip_blocks on,
// globals raise_exception(msg) and strftime_now(format), a tojson filter
// with Python's json.dumps output. The date strftime_now reports comes from
// Options.Now so renders can be reproduced. Each difference from jinja2 met
// in real templates is worked around here, and each is pinned by a test:
//
//   - Conditional expressions inside brackets, `(X if C else Y)` (Gemma 3,
//     Qwen 3.8), do not parse in gonja, which accepts `X if C else Y` only at
//     the top of `{{ }}` and `{% set %}` (TestGonjaNestedConditional is the
//     minimal reproduction). Before parsing, rewrite.go turns each into
//     `((C) and [X] or [Y])[0]`, which keeps the meaning and the laziness
//     (and/or short-circuit and return an operand; a one-element list is
//     always true). Only tokens inside tags are touched, found with gonja's
//     own lexer, and line numbers stay as in the original source.
//   - tojson: gonja emits Go's compact JSON with `'` escaped; Hugging Face
//     uses json.dumps(ensure_ascii=False), with ", " and ": " separators,
//     indent and sort_keys. Replaced (tojson.go).
//   - str.lstrip()/rstrip() without argument strip only spaces in gonja, and
//     a multi-byte character in the argument cut a character in half.
//     strip/lstrip/rstrip are replaced by Python's rules, and the trim filter
//     by str.strip (env.go).
//   - The items filter returns nothing for a dict literal in gonja; it is
//     replaced by one that keeps the literal's order (a Go map's keys are
//     sorted, having no order).
//
// gonja already provides namespace, loop.index0/first/last/previtem/
// nextitem, slicing with steps, string methods (startswith, endswith,
// split, replace, upper, lower, title ...) and dict.get.
//
// A template is code from whoever published the model, so it runs under
// limits (budget.go, package limits): include, import, from, extends and
// block are refused, so a template reads no file; the source's size and
// nesting, macro call depth, loop iterations, the size of every string
// and list it builds, the bytes it writes and the render's time are
// bounded. A limit reached, or a panic inside gonja, is returned as an
// *Error (wrapping the *limits.Error of a limit).
//
// # Errors
//
// A template that refuses the conversation through raise_exception (Gemma 2
// on a system message, roles that do not alternate) yields an
// *ExceptionError holding the template's own message. Any other failure,
// and malformed tokenizer_config.json fields, yield an *Error naming the
// template, the construct and, when gonja reports it, the line and column.
//
// # Tests
//
// Golden renders of every template in the shared test data live in
// testdata/golden (rewritten only with go test ./internal/chat -update).
// They were checked against Python's jinja2 with Hugging Face's settings by
// testdata/crosscheck.py, which go test does not run; TestPublishedFormats
// and TestQwen38Reference compare with hand-written published formats and
// with outputs verified against transformers by another project.
package chat
