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
	mu   sync.Mutex
	text strings.Builder
	done bool
	res  Result
	err  error
	wake chan struct{}
}

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

// Next waits for text or the end. It returns the text made since the last
// call; once that is all read, done is true and err says why it ended
// (nil: it finished, see Result). It returns ctx's error if ctx ends first.
func (s *Stream) Next(ctx context.Context) (text string, done bool, err error) {
	for {
		s.mu.Lock()
		text = s.text.String()
		s.text.Reset()
		done, err = s.done, s.err
		s.mu.Unlock()
		if text != "" {
			return text, false, nil
		}
		if done {
			return "", true, err
		}
		select {
		case <-s.wake:
		case <-ctx.Done():
			return "", true, ctx.Err()
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
