package chat

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"

	"github.com/nikolalohinski/gonja/v2/parser"
)

// Error reports a template that cannot be parsed or rendered, or a
// tokenizer_config.json / messages file that cannot be read.
type Error struct {
	Template string // template name (for example "qwen3" or a file name)
	Line     int    // 1-based line in the template source; 0 when unknown
	Column   int    // 1-based column; 0 when unknown
	Msg      string // what failed, naming the construct
	Err      error  // underlying error, if any
}

// Error formats the error as `chat: template "name": line L, column C: msg`.
func (e *Error) Error() string {
	s := fmt.Sprintf("chat: template %q", e.Template)
	if e.Line > 0 {
		s += fmt.Sprintf(": line %d", e.Line)
		if e.Column > 0 {
			s += fmt.Sprintf(", column %d", e.Column)
		}
	}
	return s + ": " + e.Msg
}

// Unwrap returns the underlying error.
func (e *Error) Unwrap() error { return e.Err }

// ExceptionError is returned by Render when the template itself refuses the
// conversation through raise_exception (for example Gemma 2 on a system
// message). Message is the template's own text.
type ExceptionError struct {
	Template string
	Message  string
}

// Error formats the error as `chat: template "name" raised: message`.
func (e *ExceptionError) Error() string {
	return fmt.Sprintf("chat: template %q raised: %s", e.Template, e.Message)
}

// lineRe finds the first position gonja writes into runtime error messages.
var lineRe = regexp.MustCompile(`\(Line=(\d+) Col=(\d+)\)|at line (\d+)`)

// parseError converts an error from gonja's NewTemplate. That error repeats
// the whole source ("failed to parse template '<source>': ..."); only the
// wrapped cause is kept.
func parseError(name string, err error) *Error {
	cause := err
	if u := errors.Unwrap(err); u != nil {
		cause = u
	}
	e := &Error{Template: name, Msg: "parse: " + cause.Error(), Err: cause}
	var se *parser.SyntaxError
	if errors.As(cause, &se) {
		e.Line, e.Column = se.Line, se.Column
	}
	return e
}

// renderError converts an error from template execution, picking the first
// line/column gonja mentions.
func renderError(name string, err error) *Error {
	e := &Error{Template: name, Msg: "render: " + err.Error(), Err: err}
	if m := lineRe.FindStringSubmatch(err.Error()); m != nil {
		if m[1] != "" {
			e.Line, _ = strconv.Atoi(m[1])
			e.Column, _ = strconv.Atoi(m[2])
		} else {
			e.Line, _ = strconv.Atoi(m[3])
		}
	}
	return e
}
