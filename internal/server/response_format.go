package server

// responseFormat checks response_format and returns the logits mask that
// keeps the output to it (nil for plain text).
func (s *Server) responseFormat(f *responseFormat) (func([]float32, []int), *apiError) {
	switch f.Type {
	case "", "text":
		return nil, nil
	case "json_object", "json_schema":
		return nil, badRequest("response_format", "response_format %q is not supported yet", f.Type)
	}
	return nil, badRequest("response_format", "response_format type %q: want text, json_object or json_schema", f.Type)
}
