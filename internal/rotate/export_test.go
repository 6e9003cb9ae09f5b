package rotate

// Load and Logits serve the external tests of this package.
var (
	Load   = load
	Logits = logits
)
