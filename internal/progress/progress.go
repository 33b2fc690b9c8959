// Package progress draws a one-line progress bar on stderr when stderr is a
// terminal, and stays silent when it is piped or redirected, so logs and
// CI output carry no carriage-return noise.
package progress

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"
)

// Bar is a progress bar for one task.
type Bar struct {
	mu    sync.Mutex
	w     io.Writer
	label string
	last  time.Time
	done  bool
}

// IsTerminal reports whether f is a character device (a terminal).
func IsTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// New returns a bar on stderr, or a silent one when stderr is not a terminal.
func New(label string) *Bar {
	b := &Bar{label: label}
	if IsTerminal(os.Stderr) {
		b.w = os.Stderr
	}
	return b
}

// Update shows done of total (in bytes when bytes is set); it redraws at
// most every 100 ms, and always at the end.
func (b *Bar) Update(done, total int64) {
	if b == nil || b.w == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.done {
		return
	}
	end := done >= total
	if !end && time.Since(b.last) < 100*time.Millisecond {
		return
	}
	b.last = time.Now()
	frac := 1.0
	if total > 0 {
		frac = float64(done) / float64(total)
	}
	const width = 30
	fill := int(frac * width)
	fmt.Fprintf(b.w, "\r%s [%s%s] %3.0f%% %s/%s", b.label, strings.Repeat("=", fill), strings.Repeat(" ", width-fill), 100*frac, size(done), size(total))
	if end {
		fmt.Fprintln(b.w)
		b.done = true
	}
}

// Finish ends the line if the bar was drawn but never reached its total.
func (b *Bar) Finish() {
	if b == nil || b.w == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.done && !b.last.IsZero() {
		fmt.Fprintln(b.w)
	}
	b.done = true
}

func size(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
