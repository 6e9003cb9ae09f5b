package limits

// Sizes of the files a user names, by kind (internal/userfile applies
// them), besides MaxTextFile, MaxTokenizerFile and MaxConfigFile.
const (
	// MaxImageFile bounds an encoded image (JPEG, PNG, GIF, WebP).
	MaxImageFile = 64 << 20
	// MaxCorpusFile bounds a lookup decoding corpus.
	MaxCorpusFile = 64 << 20
	// MaxTemplateFile bounds a chat template file (chat_template.jinja or
	// a --template file); its source is bounded by MaxTemplateSource too.
	MaxTemplateFile = MaxConfigFile
	// MaxRecipeFile bounds a quantization recipe (JSON).
	MaxRecipeFile = 1 << 20
)
