package serve

import (
	"context"
	"strings"
	"sync"
)

// Stream is a generation's text as it is made, then its Result. The
// scheduler never waits for a reader: text piles up until it is read, so a
// slow client delays nobody else.
type Stream struct {
	mu       sync.Mutex
	text     strings.Builder
	logprobs []TokenLogprob
	done     bool
	res      Result
	err      error
	wake     chan struct{}
}

// Chunk is what a generation made since it was last read.
type Chunk struct {
	Text string
	// Logprobs are the tokens chosen, when the request asked for them
	// (their text may still be held back: a character unfinished, a
	// possible stop string's start).
	Logprobs []TokenLogprob
}

func (c Chunk) empty() bool { return c.Text == "" && len(c.Logprobs) == 0 }

func newStream() *Stream { return &Stream{wake: make(chan struct{}, 1)} }

func (s *Stream) push(text string) {
	if text == "" {
		return
	}
	s.mu.Lock()
	s.text.WriteString(text)
	s.mu.Unlock()
	s.signal()
}

func (s *Stream) pushLogprob(lp TokenLogprob) {
	s.mu.Lock()
	s.logprobs = append(s.logprobs, lp)
	s.mu.Unlock()
	s.signal()
}

func (s *Stream) finish(res Result, err error) {
	s.mu.Lock()
	s.done, s.res, s.err = true, res, err
	s.mu.Unlock()
	s.signal()
}

func (s *Stream) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Next waits for text (or log-probabilities) or the end. It returns what
// was made since the last call; once that is all read, done is true and
// err says why it ended (nil: it finished, see Result). It returns ctx's
// error if ctx ends first.
func (s *Stream) Next(ctx context.Context) (c Chunk, done bool, err error) {
	for {
		s.mu.Lock()
		c = Chunk{Text: s.text.String(), Logprobs: s.logprobs}
		s.text.Reset()
		s.logprobs = nil
		done, err = s.done, s.err
		s.mu.Unlock()
		if !c.empty() {
			return c, false, nil
		}
		if done {
			return Chunk{}, true, err
		}
		select {
		case <-s.wake:
		case <-ctx.Done():
			return Chunk{}, true, ctx.Err()
		}
	}
}

// Result is the finished generation's result (valid once Next said done).
func (s *Stream) Result() Result {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.res
}

// Wait waits for the end, dropping unread text, and returns the result.
func (s *Stream) Wait() Result {
	for {
		if _, done, _ := s.Next(context.Background()); done {
			return s.Result()
		}
	}
}
