// Package fidelity reads the reference generations staged in
// ../shared/models (llama.cpp's greedy ids with its top-2 logits, and the
// float64 reference of stories260K) and judges a generation against them.
// Backend tests of every kind share it.
package fidelity

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/glint-llm/glint/internal/shared"
)

// Record is one llama.cpp greedy generation.
type Record struct {
	Model        string      `json:"model"`
	ModelPath    string      `json:"model_path"` // "shared/models/…"
	Prompt       string      `json:"prompt"`
	NPredict     int         `json:"n_predict"`
	PromptIDs    []int32     `json:"prompt_ids"`
	GeneratedIDs []int32     `json:"generated_ids"`
	Top2         [][]float64 `json:"top2_logits"` // [top1 id, top1 logit, top2 id, top2 logit]
}

// Path is the record's model file on this machine.
func (r Record) Path(t testing.TB) string {
	return shared.Models(t, strings.TrimPrefix(r.ModelPath, "shared/models/"))
}

// LlamaCpp returns the records of llamacpp_greedy_public.json.
func LlamaCpp(t testing.TB) []Record {
	t.Helper()
	return records(t, "llamacpp_greedy_public.json")
}

// KQuants returns the records of kquants/llamacpp_greedy_kquants.json: the
// 15 files llama-quantize made from kq-small-F16.gguf.
func KQuants(t testing.TB) []Record {
	t.Helper()
	return records(t, "kquants/llamacpp_greedy_kquants.json")
}

// All returns LlamaCpp's records, then KQuants' with "kquants/" before
// their model names (the folder they are in).
func All(t testing.TB) []Record {
	t.Helper()
	recs := LlamaCpp(t)
	for _, rec := range KQuants(t) {
		rec.Model = "kquants/" + rec.Model
		recs = append(recs, rec)
	}
	return recs
}

// records reads a file of llama.cpp greedy records under shared/models.

// llama.cpp made them at its defaults, with an f16 KV cache.
func records(t testing.TB, rel string) []Record {
	t.Helper()
	b, err := os.ReadFile(shared.Models(t, rel))
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Records []Record `json:"records"`
	}
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatalf("%s: %v", rel, err)
	}
	return f.Records
}

// NearTie is the top-1/top-2 gap below which llama.cpp's own choice may flip
// under other arithmetic: it quantises activations to 8 bits for quantised
// weights, where glint keeps them in float32.
const NearTie = 0.05

// CheckGreedy compares generated ids with the record: equal, except that at
// a step where llama.cpp's top-1/top-2 gap is below NearTie its top-2 is
// accepted too. After an accepted flip the sequences diverge legitimately,
// so the comparison stops there. It returns a description of the first
// real mismatch, or "".
func (r Record) CheckGreedy(got []int32) string {
	if len(got) < len(r.GeneratedIDs) {
		return fmt.Sprintf("generated %d ids, want %d: got %v, want %v", len(got), len(r.GeneratedIDs), got, r.GeneratedIDs)
	}
	for i, want := range r.GeneratedIDs {
		if got[i] == want {
			continue
		}
		if i < len(r.Top2) {
			t2 := r.Top2[i]
			if gap := t2[1] - t2[3]; gap < NearTie && got[i] == int32(t2[2]) {
				return "" // a legitimate near-tie flip; later steps follow another path
			}
		}
		return fmt.Sprintf("step %d: got %d, want %d (got %v, want %v)", i, got[i], want, got, r.GeneratedIDs)
	}
	return ""
}

// Prefix is the record cut to its first n generated ids (all where it has
// fewer), for a shorter run of the same check.
func (r Record) Prefix(n int) Record {
	if n < len(r.GeneratedIDs) {
		r.GeneratedIDs = r.GeneratedIDs[:n]
	}
	r.NPredict = min(r.NPredict, n)
	return r
}

// Stories is the float64 reference of stories260K.
type Stories struct {
	Path       string
	IDs        []int32     // greedy ids including BOS
	Logits     [][]float32 // teacher-forced logits at positions 0..3
	Text       string
	NGenerated int
}

// StoriesRef reads stories260K.greedy_ref.json.
func StoriesRef(t testing.TB) Stories {
	t.Helper()
	p := shared.Models(t, "stories260K/stories260K.greedy_ref.json")
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		IDs    []int32 `json:"greedy_ids_including_bos"`
		N      int     `json:"n_generated"`
		Text   string  `json:"text"`
		Logits struct {
			Values [][]float32 `json:"values"`
		} `json:"logits_teacher_forced"`
	}
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatalf("%s: %v", p, err)
	}
	return Stories{Path: filepath.Join(filepath.Dir(p), "stories260K.gguf"), IDs: f.IDs, Logits: f.Logits.Values, Text: f.Text, NGenerated: f.N}
}
