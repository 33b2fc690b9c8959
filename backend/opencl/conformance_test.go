package opencl

import (
	"testing"

	"github.com/glint-llm/glint/backend"
	"github.com/glint-llm/glint/backend/backendtest"
)

// TestConformance runs the shared suite. Each case gets a fresh Backend (a
// failed op fails a backend for good); they share the device's program.
func TestConformance(t *testing.T) {
	testBackend(t)
	backendtest.Run(t, func(t *testing.T) backend.Backend {
		b, err := New(Options{})
		if err != nil {
			t.Fatal(err)
		}
		return b
	})
}
