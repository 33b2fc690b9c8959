// Package engine is what a text generator needs from a model, whatever runs
// it: the Llama layers on a glint backend, or an ONNX Runtime session. The
// generation loop, the sampler, the CLI and the reports are written against
// Model alone.
package engine

// Model is a causal language model with its own KV cache.
type Model interface {
	// Vocab is the number of logits per token.
	Vocab() int
	// Context is the largest number of positions the cache holds.
	Context() int
	// Pos is the number of tokens already in the cache.
	Pos() int
	// Eval feeds tokens at positions Pos() … Pos()+len(tokens)-1 (a prompt
	// in one call, or one generated token) and leaves the logits of the last
	// one ready for Logits or Argmax. Feeding past Context is an error.
	Eval(tokens []int32) error
	// Logits copies the last evaluated token's logits into dst (len Vocab).
	Logits(dst []float32) error
	// Argmax returns the index of the largest last logit; a device backend
	// computes it there so that only 4 bytes come back per token.
	Argmax() (int32, error)
	// Reset empties the cache.
	Reset()
	// Close releases the model's resources.
	Close() error
}
