package chattemplate

import "github.com/glint-llm/glint/tokenizer"

// Encode tokenizes rendered template output; start says it opens the
// conversation. The template writes BOS itself where the model wants one
// (transformers tokenizes its output without adding specials), so BOS is
// added only at the start and only when the template did not write it:
// once, never twice.
func Encode(t *tokenizer.Tokenizer, text string, start bool) []int32 {
	ids := t.Encode(text, false)
	if start && t.AddBOS() && t.BOS() >= 0 && (len(ids) == 0 || ids[0] != t.BOS()) {
		ids = append([]int32{t.BOS()}, ids...)
	}
	return ids
}

// turnEnds are the end-of-turn tokens of the common templates.
var turnEnds = []string{"<|eot_id|>", "<|im_end|>", "<end_of_turn>", "<|end|>", "<|eom_id|>"}

// EndOfTurn lists the ids that end an assistant's reply beyond the
// tokenizer's end-of-generation set: the turn-ending tokens of the common
// templates and the template's own EOS text, where the vocabulary has them.
// Until every model's end-of-generation set is known to the tokenizer, a
// chat stops at these too.
func EndOfTurn(t *tokenizer.Tokenizer, mt ModelTemplate) []int32 {
	var ids []int32
	for _, tok := range append(turnEnds, mt.EOS) {
		if id, ok := t.ID(tok); ok && tok != "" {
			ids = append(ids, id)
		}
	}
	return ids
}
