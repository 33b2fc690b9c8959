// Package peer runs the llama.cpp reference build (../shared/peers:
// build-llama.sh cpu .peer/llama.cpp-cpu) as a measuring instrument: its
// refgen-greedy, forced along glint's token ids, dumps the logits llama.cpp
// computes at every step, and Compare measures how far glint's are. It is
// never a dependency: without the build, Find says so and tests skip.
package peer

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/glint-llm/glint/sample"
)

// Env names the folder holding refgen-greedy (a llama.cpp build/bin).
const Env = "GLINT_LLAMACPP"

// Find returns the folder of the peer's binaries: $GLINT_LLAMACPP, else
// .peer/llama.cpp-cpu/build/bin in the module root above the working
// directory.
func Find() (string, error) {
	if d := os.Getenv(Env); d != "" {
		if _, err := os.Stat(filepath.Join(d, "refgen-greedy")); err != nil {
			return "", fmt.Errorf("peer: $%s=%s has no refgen-greedy", Env, d)
		}
		return d, nil
	}
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			d := filepath.Join(dir, ".peer", "llama.cpp-cpu", "build", "bin")
			if _, err := os.Stat(filepath.Join(d, "refgen-greedy")); err != nil {
				return "", fmt.Errorf("peer: llama.cpp is not built (../shared/peers/build-llama.sh cpu %s, or set $%s)",
					filepath.Join(dir, ".peer", "llama.cpp-cpu"), Env)
			}
			return d, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("peer: no go.mod above the working directory")
		}
		dir = parent
	}
}

// KV is the peer's KV cache: its K and V types by llama.cpp's names ("":
// f16, its default) and whether attention runs as flash attention (-fa).
type KV struct {
	K, V  string
	Flash bool
}

// Forced runs llama.cpp on model: it evaluates prompt, then feeds force one
// id a step, and returns the logits of every step (len(force) rows of
// vocab), with the KV cache kv.
func Forced(dir, model string, prompt, force []int32, kv KV, vocab int) ([][]float32, error) {
	tmp, err := os.CreateTemp("", "glint-peer-*.bin")
	if err != nil {
		return nil, err
	}
	tmp.Close()
	defer os.Remove(tmp.Name())
	for _, t := range []*string{&kv.K, &kv.V} {
		if *t == "" {
			*t = "f16"
		}
	}
	args := []string{"-m", model, "--ids", join(prompt),
		"-n", fmt.Sprint(len(force)), "--force", join(force), "-ctk", kv.K, "-ctv", kv.V, "--dump-logits", tmp.Name(),
		"-c", fmt.Sprint(max(512, len(prompt)+len(force)+1))}
	if kv.Flash {
		args = append(args, "-fa")
	}
	cmd := exec.Command(filepath.Join(dir, "refgen-greedy"), args...)
	cmd.Env = append(os.Environ(), "LD_LIBRARY_PATH="+dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("peer: refgen-greedy on %s: %w: %s", model, err, lastLine(out))
	}
	raw, err := os.ReadFile(tmp.Name())
	if err != nil {
		return nil, err
	}
	return Rows(raw, vocab)
}

// Rows splits a logits dump (little-endian float32, one vocab row per step:
// generate --dump-logits and refgen-greedy --dump-logits) into rows.
func Rows(raw []byte, vocab int) ([][]float32, error) {
	if vocab <= 0 || len(raw)%(4*vocab) != 0 {
		return nil, fmt.Errorf("peer: %d bytes of logits are not rows of %d floats", len(raw), vocab)
	}
	rows := make([][]float32, len(raw)/(4*vocab))
	for i := range rows {
		rows[i] = make([]float32, vocab)
		for j := range rows[i] {
			rows[i][j] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*(i*vocab+j):]))
		}
	}
	return rows, nil
}

// Step compares one step's logits.
type Step struct {
	// MaxDiff is max_j |glint_j − peer_j|; MeanDiff is the mean of
	// glint_j − peer_j (a systematic shift shows here).
	MaxDiff, MeanDiff float64
	// Top and PeerTop are each engine's argmax; Gap is the peer's top-1/
	// top-2 gap, below which a differing argmax is a near-tie.
	Top, PeerTop int32
	Gap          float64
}

// Compare measures glint's logit rows against the peer's, step by step.
func Compare(glint, peer [][]float32) ([]Step, error) {
	if len(glint) != len(peer) {
		return nil, fmt.Errorf("peer: %d steps of glint logits, %d of llama.cpp", len(glint), len(peer))
	}
	steps := make([]Step, len(glint))
	for i := range glint {
		g, p := glint[i], peer[i]
		if len(g) != len(p) {
			return nil, fmt.Errorf("peer: step %d: %d logits, llama.cpp %d", i, len(g), len(p))
		}
		s := &steps[i]
		var sum float64
		for j := range g {
			d := float64(g[j]) - float64(p[j])
			s.MaxDiff = math.Max(s.MaxDiff, math.Abs(d))
			sum += d
		}
		s.MeanDiff = sum / float64(len(g))
		s.Top = sample.Argmax(g)
		s.PeerTop, s.Gap = sample.TopGap(p)
	}
	return steps, nil
}

// Within is the share of steps whose MaxDiff is at most tol.
func Within(steps []Step, tol float64) float64 {
	if len(steps) == 0 {
		return 0
	}
	n := 0
	for _, s := range steps {
		if s.MaxDiff <= tol {
			n++
		}
	}
	return float64(n) / float64(len(steps))
}

func join(ids []int32) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = fmt.Sprint(id)
	}
	return strings.Join(s, ",")
}

func lastLine(out []byte) string {
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	return lines[len(lines)-1]
}
