// Package engine is what a text generator needs from a model, whatever runs
// it — the Llama layers on a glint backend, or an ONNX Runtime session —
// and the generation built on it.
//
// Model is the low-level interface, llama.cpp's context: a KV cache of many
// sequences, a batched forward pass (Decode) over tokens of any of them,
// the logits of the tokens asked for, and the sequence operations. It is
// used by one goroutine at a time.
//
// Engine wraps a Model for concurrent use: it owns the sequence ids and
// runs a scheduler that puts the work of every Session waiting into one
// Decode (continuous batching: a session that asks while a step runs joins
// the next one; prefill chunks and decode tokens mix). A Session is one
// sequence: Prefill, Next, Truncate, Fork, State/LoadState. A Generator is
// the one generation loop over a session (sampling, end tokens, stop
// strings, text, limits); Generate and Forward (past in, logits and present
// out) are built on them.
package engine

import "errors"

// Item is one token of a batch: its id, its position in its sequence, the
// sequence, and whether its logits are wanted.
type Item struct {
	Token  int32
	Pos    int32
	Seq    int
	Output bool
}

// Model is a causal language model with a KV cache of many sequences. It
// is not safe for concurrent use (Engine is).
type Model interface {
	// Vocab is the number of logits per token.
	Vocab() int
	// Context is the most positions one sequence holds (llama.cpp's
	// n_ctx_seq: the whole cache when it is unified, a stream's share when
	// each sequence has its own).
	Context() int
	// Seqs is the number of sequence ids, 0…Seqs()-1.
	Seqs() int
	// MaxOutputs is the most tokens of one Decode that may ask for logits.
	MaxOutputs() int
	// Decode runs a batch through the model, any number of tokens of any
	// sequences in any mix: each token is stored in the KV cache at its
	// position and attends to the cells of its own sequence at positions
	// up to its own. The tokens with Output set have their logits ready
	// afterwards, numbered 0, 1, … in batch order, until the next Decode.
	// Every weight is read once per batch (of up to the model's batch
	// size; longer ones run in parts). A batch that does not fit in the
	// cache is refused before any of it is stored.
	Decode(batch []Item) error
	// Logits copies the logits of output i of the last Decode into dst
	// (len Vocab).
	Logits(i int, dst []float32) error
	// Argmax writes, for outputs 0…len(dst)-1 of the last Decode, the
	// index of the largest logit (the first on ties); a device backend
	// computes it there, so that only the indices come back.
	Argmax(dst []int32) error

	// The sequence operations are llama.cpp's llama_kv_self_seq_*, over
	// positions [p0, p1): p0 < 0 means 0, p1 < 0 means no end.

	// SeqRemove removes the positions [p0, p1) of sequence seq (of every
	// sequence if seq < 0).
	SeqRemove(seq, p0, p1 int) error
	// SeqCopy makes dst hold src's positions [p0, p1) too (stored once
	// where the cache is unified).
	SeqCopy(src, dst, p0, p1 int) error
	// SeqKeep removes every sequence but seq.
	SeqKeep(seq int) error
	// SeqShift adds delta to the positions [p0, p1) of seq, re-rotating the
	// cached keys (the K-shift) before the next Decode; positions that
	// fall below 0 are removed.
	SeqShift(seq, p0, p1, delta int) error
	// SeqPosMax is seq's largest position, -1 when it holds none.
	SeqPosMax(seq int) int
	// SeqState returns sequence seq's KV cells as bytes (its positions,
	// keys and values, with a header naming the model they belong to), as
	// llama_state_seq_get_data does.
	SeqState(seq int) ([]byte, error)
	// SeqLoadState replaces seq's cells with a state SeqState made on the
	// same model (a truncated or foreign state is an error, and changes
	// nothing).
	SeqLoadState(seq int, state []byte) error

	// Close releases the model's resources.
	Close() error
}

// ErrUnsupported is wrapped by a Model that cannot do what it is asked
// (the ONNX runner holds one sequence and cannot move positions).
var ErrUnsupported = errors.New("not supported by this model")

// Batch is llama_batch_get_one: tokens of sequence seq at positions pos,
// pos+1, …, with the last one's logits wanted (output 0 of the Decode).
func Batch(seq, pos int, tokens []int32) []Item {
	b := make([]Item, len(tokens))
	for i, t := range tokens {
		b[i] = Item{Token: t, Pos: int32(pos + i), Seq: seq, Output: i == len(tokens)-1}
	}
	return b
}

// Verifier is a Model that runs a batch as decode steps: Verify is Decode
// with every token given the arithmetic of a decode step of its own, so
// that the logits of a sequence's tokens fed together are, to the bit,
// those of feeding them one at a time. Speculative decoding verifies its
// drafts with it, so that it never changes the answer; a Model without it
// is not drafted for.
type Verifier interface {
	Verify(batch []Item) error
}
