package chattemplate

import "github.com/glint-llm/glint/tokenizer"

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
