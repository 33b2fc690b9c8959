package report_test

import (
	"path/filepath"
	"testing"

	"github.com/glint-llm/glint/model/synth"
	"github.com/glint-llm/glint/report"
)

// A run's row reports the KV cache's bytes: every layer's K and V, cells ×
// KV heads × the bytes of a head row of the type, computed here from the
// shape (synth's "small": 2 layers, 2 KV heads of 64) and the ggml block
// sizes (f16: 2 bytes a value; q8_0: 34 bytes per 32), so a q8_0/q8_0 cache
// (with flash attention, which it needs) reports 17/32 of f16's.
func TestKVCacheBytesReported(t *testing.T) {
	p := filepath.Join(t.TempDir(), "small-F32.gguf")
	if err := synth.WriteGGUF(p, synth.Options{Shape: "small", Type: "F32", Seed: 2, Std: 0.05}); err != nil {
		t.Fatal(err)
	}
	const layers, cells, kvHeads = 2, 1024, 2
	for _, c := range []struct {
		k, v, fa string
		row      int64 // bytes of one 64-value head row, K plus V
	}{{"f16", "f16", "off", 128 + 128}, {"q8_0", "q8_0", "auto", 68 + 68}, {"q8_0", "f16", "on", 68 + 128}, {"q4_0", "q4_0", "on", 36 + 36}} {
		res := report.Measure(report.Job{Backend: "cpu", Model: p, PromptIDs: []int32{1, 2, 3}, N: 2, Runs: 1, Threads: 1,
			Context: cells, CacheTypeK: c.k, CacheTypeV: c.v, FlashAttn: c.fa})
		if res.Status != report.StatusOK {
			t.Fatalf("%s/%s: %s: %s", c.k, c.v, res.Status, res.Reason)
		}
		if want := int64(layers*cells*kvHeads) * c.row; res.KVCacheBytes != want {
			t.Errorf("%s/%s: kv_cache_bytes %d, want %d", c.k, c.v, res.KVCacheBytes, want)
		}
	}
}
