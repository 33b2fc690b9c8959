package opencl

import (
	"testing"

	"github.com/glint-llm/glint/backend"
	"github.com/glint-llm/glint/backend/backendtest"
)

// TestConformance runs the shared suite on every selected device. Each case
// gets a fresh Backend (a failed op fails a backend for good); they share
// the device's program.
func TestConformance(t *testing.T) {
	eachDevice(t, func(t *testing.T, shared *Backend) {
		backendtest.Run(t, func(t *testing.T) backend.Backend {
			b, err := open(deviceOf(shared), shared.v, testFlavour)
			if err != nil {
				t.Fatal(err)
			}
			return b
		})
	})
}
