// Package report measures generation latency across backends — load time,
// time to first token (TTFT), time between tokens (TBT), peak memory, OpenCL
// kernel launches and, optionally, time per op kind — and writes the result
// as a markdown table, a versioned JSON document (SCHEMA.md) and an SVG
// chart. It is the engine of `generate report`.
//
// Each backend is measured by a Runner. Exec runs it in a child process so
// that peak RSS belongs to that backend alone and a crashing backend cannot
// take the report down; Measure is the in-process measurement the child
// performs.
package report

import "time"

// SchemaVersion is the version of the JSON document (report/SCHEMA.md). It
// changes whenever a field changes meaning or is removed.
const SchemaVersion = 1

// Status of one backend's measurement.
const (
	StatusOK      = "ok"
	StatusSkipped = "skipped" // the backend cannot run here: not built, no device, no library, no model for it
	StatusFailed  = "failed"  // it could run but did not: a load or generation error, a crash
)

// Report is the whole JSON document.
type Report struct {
	SchemaVersion int       `json:"schema_version"`
	Created       time.Time `json:"created"`
	Machine       Machine   `json:"machine"`
	Settings      Settings  `json:"settings"`
	Backends      []Backend `json:"backends"`
}

// Machine describes where the report was made.
type Machine struct {
	Hostname  string `json:"hostname"`
	OS        string `json:"os"`
	Arch      string `json:"arch"`
	CPUModel  string `json:"cpu_model"`
	Cores     int    `json:"cores"`
	GoVersion string `json:"go_version"`
}

// Settings are the parameters shared by every backend's runs.
type Settings struct {
	Prompt     string  `json:"prompt,omitempty"`
	PromptIDs  []int32 `json:"prompt_ids,omitempty"`
	NPredict   int     `json:"n_predict"`
	Runs       int     `json:"runs"`
	WarmupRuns int     `json:"warmup_runs"`
	Threads    int     `json:"threads"`
	Device     string  `json:"device,omitempty"`
	Tune       string  `json:"tune,omitempty"`
	Context    int     `json:"context"`
	CacheTypeK string  `json:"cache_type_k"`
	CacheTypeV string  `json:"cache_type_v"`
	FlashAttn  string  `json:"flash_attn,omitempty"`
	Sampling   string  `json:"sampling"`
	IgnoreEOS  bool    `json:"ignore_eos"`
	Profile    bool    `json:"profile"`
	// Speculative is the speculative decoding asked for; nil when none.
	Speculative *SpecSettings `json:"speculative,omitempty"`
}

// Backend is one backend's measurement. Every timing is kept raw; Summary
// is derived from them.
type Backend struct {
	Backend string `json:"backend"`
	Status  string `json:"status"`
	// Reason says why a backend was skipped or failed.
	Reason string    `json:"reason,omitempty"`
	Device string    `json:"device,omitempty"`
	Model  ModelInfo `json:"model"`
	// KVCacheBytes is the memory the KV cache takes (its K and V of every
	// layer, at the run's context and cache types).
	KVCacheBytes int64 `json:"kv_cache_bytes,omitempty"`

	PromptTokens int `json:"prompt_tokens"`
	NPredict     int `json:"n_predict"`
	Runs         int `json:"runs"`

	LoadUs int64 `json:"load_us"`
	// TTFTUs is each run's time to first token; GapsUs[r] are run r's
	// NPredict-1 inter-token gaps. Microseconds.
	TTFTUs []int64   `json:"ttft_us"`
	GapsUs [][]int64 `json:"gaps_us"`
	// Generated is the first timed run's tokens (greedy, so every run and,
	// numerics permitting, every backend should agree).
	Generated []int32 `json:"generated,omitempty"`

	// PeakRSSBytes is the measuring process's peak resident set (VmHWM):
	// the backend alone when run through Exec.
	PeakRSSBytes int64 `json:"peak_rss_bytes"`
	// LaunchesPerRun are the kernel launches of each run's decode phase
	// (after the first token); nil when the backend does not count them.
	LaunchesPerRun   []int64  `json:"launches_per_run,omitempty"`
	LaunchesPerToken *float64 `json:"launches_per_token,omitempty"`
	// DeviceBytesPerToken is the device-memory bytes the decode phase's
	// launches read and write per token, each kernel operand counted once
	// (opencl.Stats.Moved): weights, activations, the KV cells attention
	// spans. Divided by a GPU's bandwidth it is the floor of its TBT.
	DeviceBytesPerToken *float64 `json:"device_bytes_per_token,omitempty"`

	Profile *Profile `json:"profile,omitempty"`
	// Speculative is what speculative decoding did in the timed runs; nil
	// when it was not asked for.
	Speculative *Speculative `json:"speculative,omitempty"`
	Summary     *Summary     `json:"summary,omitempty"`
}

// ModelInfo identifies the model file a backend ran.
type ModelInfo struct {
	Path string `json:"path"`
	// SHA256 is the file's digest; for a directory, the digest of the
	// sorted lines "relative/path<TAB>sha256 of that file\n".
	SHA256 string `json:"sha256,omitempty"`
	Bytes  int64  `json:"bytes"`
	Format string `json:"format,omitempty"` // gguf, safetensors or onnx
	// FileType is GGUF's general.file_type as llama.cpp names it.
	FileType string `json:"file_type,omitempty"`
	// TensorTypes counts tensors per storage type.
	TensorTypes map[string]int `json:"tensor_types,omitempty"`
}

// Profile is time per op kind per generated token, and per prompt, from Runs
// extra runs with backend.Profiled timing switched on (so the timed runs are
// unaffected).
type Profile struct {
	// Tokens is how many decode steps were timed, Runs·(NPredict-1): prefill
	// is left out so that the numbers are per generated token.
	Tokens        int                `json:"tokens"`
	PerTokenUs    map[string]float64 `json:"per_token_us"`
	CallsPerToken map[string]float64 `json:"calls_per_token"`
	// PromptUs is the time per op kind of one prompt's prefill (up to the
	// first token), averaged over the runs: where TTFT goes.
	PromptUs map[string]float64 `json:"prompt_us,omitempty"`
}

// Summary is derived from the raw timings. TBT statistics pool the gaps of
// every run; p90 is the nearest-rank percentile.
type Summary struct {
	TTFTMsMedian float64 `json:"ttft_ms_median"`
	TTFTMsMin    float64 `json:"ttft_ms_min"`
	TTFTMsMax    float64 `json:"ttft_ms_max"`
	TBTMsMedian  float64 `json:"tbt_ms_median"`
	TBTMsP90     float64 `json:"tbt_ms_p90"`
	TBTMsMin     float64 `json:"tbt_ms_min"`
	TBTMsMax     float64 `json:"tbt_ms_max"`
	// TokensPerSec is 1 / median TBT.
	TokensPerSec float64 `json:"tokens_per_sec"`
}

// SpecSettings are the speculative decoding options every backend was
// given (glint.SpecOptions, as the flags set them).
type SpecSettings struct {
	Type       string  `json:"type"`
	DraftModel string  `json:"draft_model,omitempty"`
	DraftMax   int     `json:"draft_max"`
	DraftMin   int     `json:"draft_min"`
	DraftPMin  float32 `json:"draft_p_min"`
	NgramN     int     `json:"ngram_n"`
	NgramM     int     `json:"ngram_m"`
	NgramMin   int     `json:"ngram_min"`
	Adaptive   bool    `json:"adaptive"`
}

// Speculative sums speculative decoding's counts over the timed runs
// (engine.Timing's Passes, Drafted, Accepted).
type Speculative struct {
	// Passes are the target model's steps that chose the Runs·NPredict
	// tokens: one per token without speculation, the prompt's included.
	Passes   int `json:"passes"`
	Drafted  int `json:"drafted"`
	Accepted int `json:"accepted"`
	// TokensPerPass is Runs·NPredict / Passes: what a verification step
	// yields, 1 when no draft is ever accepted.
	TokensPerPass float64 `json:"tokens_per_pass"`
	// Off says why speculative decoding turned itself off (the first timed
	// run's engine.Timing.SpecOff); the counts are then those of plain
	// decoding.
	Off string `json:"off,omitempty"`
}
