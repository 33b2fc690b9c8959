package engine

import (
	"errors"
	"strings"
)

// ErrStop, returned by Options.OnToken, ends the generation normally: the
// caller saw what it was waiting for (a stop string, a client gone away).
var ErrStop = errors.New("generation stopped")

// StopStrings ends generated text at the first of a set of strings, as
// llama.cpp's --stop (its "antiprompt") does, and prints nothing of it.
// Text that could still become a stop string is held back until the next
// piece decides it, so no part of a stop string is ever released. The zero
// value has no stop strings and passes everything through.
type StopStrings struct {
	stops   []string
	pending string
	done    bool
}

// NewStopStrings matches stops; empty strings are ignored.
func NewStopStrings(stops []string) *StopStrings {
	s := &StopStrings{}
	for _, x := range stops {
		if x != "" {
			s.stops = append(s.stops, x)
		}
	}
	return s
}

// Add takes the next piece of generated text and returns what may be shown
// now. stopped reports that a stop string is complete: out is then the text
// before it, and everything after is dropped.
func (s *StopStrings) Add(piece string) (out string, stopped bool) {
	if s.done {
		return "", true
	}
	s.pending += piece
	cut := -1
	for _, x := range s.stops {
		if i := strings.Index(s.pending, x); i >= 0 && (cut < 0 || i < cut) {
			cut = i
		}
	}
	if cut >= 0 {
		out, s.pending, s.done = s.pending[:cut], "", true
		return out, true
	}
	keep := 0
	for _, x := range s.stops {
		keep = max(keep, overlap(s.pending, x))
	}
	out = s.pending[:len(s.pending)-keep]
	s.pending = s.pending[len(s.pending)-keep:]
	return out, false
}

// Flush returns the text held back at the end of a generation that no stop
// string ended.
func (s *StopStrings) Flush() string {
	out := s.pending
	s.pending = ""
	return out
}

// Stopped reports whether a stop string has been seen.
func (s *StopStrings) Stopped() bool { return s.done }

// overlap is the length of the longest proper prefix of stop that text
// ends with.
func overlap(text, stop string) int {
	for n := min(len(text), len(stop)-1); n > 0; n-- {
		if strings.HasSuffix(text, stop[:n]) {
			return n
		}
	}
	return 0
}
