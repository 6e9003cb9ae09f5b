// Package layering holds only a test: it enforces that imports between
// aotlm's packages point down the layers of docs/architecture.md (the
// engine never imports architectures, tokenizers import no tensor code...).
package layering
