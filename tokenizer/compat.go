package tokenizer

import "fmt"

// Compatible reports, as an error naming the first difference, whether a
// draft model's vocabulary can draft for a target's (speculative
// decoding), by llama.cpp's common_speculative_are_compatible: the same
// algorithm, the same BOS and EOS and whether each is added, sizes within
// 128 of each other, and the same text for every token from id 5 on that
// both have.
func Compatible(target, draft *Tokenizer) error {
	const maxSizeDiff, firstChecked = 128, 5
	switch {
	case target.algo != draft.algo:
		return fmt.Errorf("tokenizer: the draft vocabulary's type differs from the target's")
	case target.bos != draft.bos || target.eos != draft.eos || target.addBOS != draft.addBOS || target.addEOS != draft.addEOS:
		return fmt.Errorf("tokenizer: special tokens differ: target bos %d (add %v), eos %d (add %v); draft bos %d (add %v), eos %d (add %v)",
			target.bos, target.addBOS, target.eos, target.addEOS, draft.bos, draft.addBOS, draft.eos, draft.addEOS)
	}
	nt, nd := len(target.tokens), len(draft.tokens)
	if d := nt - nd; d > maxSizeDiff || -d > maxSizeDiff {
		return fmt.Errorf("tokenizer: target vocabulary of %d tokens, draft of %d: they differ by more than %d", nt, nd, maxSizeDiff)
	}
	for i := firstChecked; i < min(nt, nd); i++ {
		if target.tokens[i] != draft.tokens[i] {
			return fmt.Errorf("tokenizer: token %d is %q in the target vocabulary, %q in the draft's", i, target.tokens[i], draft.tokens[i])
		}
	}
	return nil
}
