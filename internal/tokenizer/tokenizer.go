package tokenizer

// Tokenizer turns text into token ids and back. Implementations are safe for
// concurrent use once built.
type Tokenizer interface {
	// Encode tokenizes text. It adds BOS/EOS only when opts.AddSpecial is set,
	// following the model's own rule (SentencePiece add_bos, or the
	// tokenizer.json post-processor template).
	Encode(text string, opts EncodeOptions) []int
	// Decode turns ids into text. Control tokens (BOS, EOS, padding) are
	// skipped; byte-fallback tokens become their bytes, so the result may
	// hold invalid UTF-8 only if the ids themselves split a character.
	Decode(ids []int) string
	// Token returns the vocabulary entry of id as stored ("▁Once", "<0x0A>",
	// "Ġthe"), or "" for an id out of range.
	Token(id int) string
	// VocabSize is the number of ids, added tokens included.
	VocabSize() int
	// BOS and EOS are the beginning- and end-of-sequence ids, -1 if none.
	BOS() int
	EOS() int
}

// EncodeOptions controls Encode.
type EncodeOptions struct {
	// AddSpecial adds the model's BOS (and EOS, where its template says so).
	AddSpecial bool
	// ParseSpecial recognizes special tokens written in the text (such as
	// "<|im_start|>") as their ids; when false they are tokenized as plain text.
	ParseSpecial bool
}
