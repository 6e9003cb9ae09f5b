package serve

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// apiError is an error answer in OpenAI's shape:
// {"error": {"message", "type", "param", "code"}}.
type apiError struct {
	Status  int    `json:"-"`
	Message string `json:"message"`
	Type    string `json:"type"`
	Param   any    `json:"param"` // the offending field, or null
	Code    any    `json:"code"`  // a short machine-readable code, or null
	// RetryAfter, when set, is sent as the Retry-After header (seconds).
	RetryAfter int `json:"-"`
}

func (e *apiError) Error() string { return e.Message }

// badRequest is a 400 invalid_request_error about param.
func badRequest(param, format string, args ...any) *apiError {
	e := &apiError{Status: http.StatusBadRequest, Type: "invalid_request_error", Message: fmt.Sprintf(format, args...)}
	if param != "" {
		e.Param = param
	}
	return e
}

func writeError(w http.ResponseWriter, e *apiError) {
	if e.Type == "" {
		e.Type = "invalid_request_error"
	}
	if e.RetryAfter > 0 {
		w.Header().Set("Retry-After", fmt.Sprint(e.RetryAfter))
	}
	writeJSON(w, e.Status, map[string]any{"error": e})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.Encode(v)
}

// decodeBody reads one JSON value from the request body into v, turning
// every failure into a 4xx that names the problem. The Content-Type is
// not checked: curl -d sends JSON as a form.
func decodeBody(r *http.Request, v any) *apiError {
	data, err := io.ReadAll(r.Body)
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return &apiError{Status: http.StatusRequestEntityTooLarge, Type: "invalid_request_error", Code: "request_too_large",
				Message: fmt.Sprintf("the request body is larger than %d bytes", tooBig.Limit)}
		}
		return badRequest("", "reading the request body: %v", err)
	}
	return decodeJSON(data, v)
}

// decodeJSON parses data into v with errors that name the field.
func decodeJSON(data []byte, v any) *apiError {
	if len(strings.TrimSpace(string(data))) == 0 {
		return badRequest("", "the request body is empty: send a JSON object")
	}
	if err := json.Unmarshal(data, v); err != nil {
		var typeErr *json.UnmarshalTypeError
		var synErr *json.SyntaxError
		switch {
		case errors.As(err, &typeErr):
			field := strings.TrimPrefix(typeErr.Field, "genFields.")
			if field == "" {
				return badRequest("", "the request must be a JSON object, not a %s", typeErr.Value)
			}
			return badRequest(field, "field %q: a JSON %s where %s was expected", field, typeErr.Value, kindName(typeErr.Type.String()))
		case errors.As(err, &synErr):
			return badRequest("", "the request body is not valid JSON: %v (at byte %d)", synErr, synErr.Offset)
		default:
			var fe *fieldError
			if errors.As(err, &fe) {
				return badRequest(fe.field, "field %q: %s", fe.field, fe.msg)
			}
			return badRequest("", "the request body is not valid JSON: %v", err)
		}
	}
	return nil
}

// kindName names a Go type the way an API user thinks of it.
func kindName(t string) string {
	switch {
	case strings.HasPrefix(t, "int"), strings.HasPrefix(t, "*int"), strings.HasPrefix(t, "uint"):
		return "an integer"
	case strings.HasPrefix(t, "float"), strings.HasPrefix(t, "*float"):
		return "a number"
	case t == "string", t == "*string":
		return "a string"
	case t == "bool", t == "*bool":
		return "a boolean"
	case strings.HasPrefix(t, "[]"):
		return "an array"
	}
	return "an object"
}

// fieldError is a custom decoder's complaint about one field.
type fieldError struct {
	field, msg string
}

func (e *fieldError) Error() string { return e.field + ": " + e.msg }
