// Package shared locates the read-only test data in ../shared/models (see
// its MANIFEST.md). GLINT_SHARED may name the shared folder instead.
package shared

import (
	"os"
	"path/filepath"
	"testing"
)

// Root returns the shared folder, or "" when it cannot be found.
func Root() string {
	if d := os.Getenv("GLINT_SHARED"); d != "" {
		return d
	}
	dir, err := os.Getwd()
	if err != nil {
		return ""
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			d := filepath.Join(dir, "..", "shared")
			if _, err := os.Stat(filepath.Join(d, "models")); err == nil {
				return d
			}
			return ""
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}

// Models returns the path of a file or folder under shared/models, skipping
// the test with a one-line reason when the shared folder is absent. A
// missing file inside a present folder fails the test: CI always has it.
func Models(t testing.TB, rel string) string {
	t.Helper()
	root := Root()
	if root == "" {
		t.Skip("shared test data not found (../shared/models; set GLINT_SHARED)")
	}
	p := filepath.Join(root, "models", rel)
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("shared data: %v", err)
	}
	return p
}
