package report

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
)

// Runner measures one backend. It reports failure in the returned
// Backend's Status and Reason rather than as an error.
type Runner func(ctx context.Context, j Job) Backend

// InProcess measures in this process (Measure): cheaper, but peak RSS is
// the process's and a crash ends the report.
func InProcess(_ context.Context, j Job) Backend { return Measure(j) }

// Exec returns a Runner that runs each job in a child process: argv[0]
// with argv[1:] (and env added to this process's environment) must start
// Worker, which reads the job as JSON on stdin and writes the result as
// JSON on stdout. A child that crashes or writes no result becomes a
// failed row with its exit status and the end of its stderr.
func Exec(argv []string, env ...string) Runner {
	return func(ctx context.Context, j Job) Backend {
		failed := func(format string, args ...any) Backend {
			return Backend{Backend: j.Backend, Status: StatusFailed, Reason: fmt.Sprintf(format, args...),
				Model: ModelInfo{Path: j.Model}, NPredict: j.N, Runs: j.Runs}
		}
		if len(argv) == 0 {
			return failed("report: no worker command")
		}
		in, err := json.Marshal(j)
		if err != nil {
			return failed("report: encode job: %v", err)
		}
		cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
		cmd.Env = append(os.Environ(), env...)
		cmd.Stdin = bytes.NewReader(in)
		var out bytes.Buffer
		stderr := &tail{max: 4 << 10}
		cmd.Stdout, cmd.Stderr = &out, stderr
		runErr := cmd.Run()

		var res Backend
		if err := json.Unmarshal(out.Bytes(), &res); err != nil || res.Status == "" {
			why := "no result"
			if runErr != nil {
				why = runErr.Error()
			}
			if s := strings.TrimSpace(stderr.String()); s != "" {
				why += ": " + s
			}
			return failed("worker process for %s: %s", j.Backend, why)
		}
		if res.PeakRSSBytes == 0 {
			res.PeakRSSBytes = childPeakRSS(cmd.ProcessState)
		}
		return res
	}
}

// Worker is the child side of Exec: it reads a Job as JSON from r,
// measures it (Measure) and writes the result as JSON to w. Its error is
// about the pipes only; a failed measurement is a result.
func Worker(r io.Reader, w io.Writer) error {
	var j Job
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&j); err != nil {
		return fmt.Errorf("report worker: read job: %w", err)
	}
	res := Measure(j)
	if err := json.NewEncoder(w).Encode(res); err != nil {
		return fmt.Errorf("report worker: write result: %w", err)
	}
	return nil
}

// tail keeps the last max bytes written to it: a crash's last words.
type tail struct {
	max int
	b   []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = append(t.b[:0], t.b[len(t.b)-t.max:]...)
	}
	return len(p), nil
}

func (t *tail) String() string { return string(t.b) }

// errNoRunner is returned by Run without a Runner.
var errNoRunner = errors.New("report: no runner")
