package onnx

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	ort "github.com/yalue/onnxruntime_go"
)

// LibEnv names the environment variable that points at libonnxruntime.
const LibEnv = "ONNXRUNTIME_LIB"

// libRel is where scripts/onnxruntime.sh (make onnxruntime) installs the
// library, relative to the repository root.
var libRel = filepath.Join("third_party", "onnxruntime", "libonnxruntime.so.1")

const libHint = `run "make onnxruntime" (scripts/onnxruntime.sh) or set ` + LibEnv +
	` to a libonnxruntime.so.1 of ONNX Runtime 1.24 or newer`

// ErrLibrary is wrapped by every error about finding or loading the ONNX
// Runtime shared library.
var ErrLibrary = errors.New("ONNX Runtime library unavailable")

// findLibrary resolves the library path: the explicit option, then the
// environment, then third_party/onnxruntime found by walking up from the
// working directory and from the executable's directory (so both `go test`
// in a package folder and an installed binary next to the checkout find it).
func findLibrary(opt string) (string, error) {
	if opt != "" {
		return checkLibFile(opt, "Options.Lib")
	}
	if env := os.Getenv(LibEnv); env != "" {
		return checkLibFile(env, LibEnv)
	}
	var starts []string
	if wd, err := os.Getwd(); err == nil {
		starts = append(starts, wd)
	}
	if exe, err := os.Executable(); err == nil {
		if real, err := filepath.EvalSymlinks(exe); err == nil {
			exe = real
		}
		starts = append(starts, filepath.Dir(exe))
	}
	for _, dir := range starts {
		for {
			p := filepath.Join(dir, libRel)
			if st, err := os.Stat(p); err == nil && !st.IsDir() {
				return p, nil
			}
			parent := filepath.Dir(dir)
			if parent == dir {
				break
			}
			dir = parent
		}
	}
	return "", fmt.Errorf("onnx: %w: %s not found above %q; %s", ErrLibrary, libRel, starts, libHint)
}

func checkLibFile(p, from string) (string, error) {
	st, err := os.Stat(p)
	if err != nil {
		return "", fmt.Errorf("onnx: %w: %s=%q: %v; %s", ErrLibrary, from, p, err, libHint)
	}
	if st.IsDir() {
		return "", fmt.Errorf("onnx: %w: %s=%q is a directory; %s", ErrLibrary, from, p, libHint)
	}
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", fmt.Errorf("onnx: %w: %s=%q: %v", ErrLibrary, from, p, err)
	}
	return abs, nil
}

// ONNX Runtime's environment is process-wide and onnxruntime_go can create it
// only once, so the first library that loads is the one every model uses.
// Failures are remembered per path: retrying the same broken file would only
// repeat the error, while a different path may still be tried (a failed
// load leaves onnxruntime_go uninitialised).
var env struct {
	sync.Mutex
	path    string // the loaded library, "" until one loads
	version string
	failed  map[string]error
}

// initRuntime loads the ONNX Runtime library named by opt (or found by
// findLibrary) and returns its path and version.
func initRuntime(opt string) (string, string, error) {
	p, err := findLibrary(opt)
	if err != nil {
		return "", "", err
	}
	env.Lock()
	defer env.Unlock()
	if env.path != "" {
		if env.path != p && !sameFile(env.path, p) {
			return "", "", fmt.Errorf("onnx: %w: this process already loaded %s; it cannot also load %s", ErrLibrary, env.path, p)
		}
		return env.path, env.version, nil
	}
	if err := env.failed[p]; err != nil {
		return "", "", err
	}
	ort.SetSharedLibraryPath(p)
	if err := ort.InitializeEnvironment(); err != nil {
		// An older library has no API version 24: GetApi returns NULL,
		// which onnxruntime_go reports as "Error setting ORT API base: 2".
		err = fmt.Errorf("onnx: %w: cannot load %s (wrong file or an ONNX Runtime older than 1.24?): %v; %s",
			ErrLibrary, p, err, libHint)
		if env.failed == nil {
			env.failed = map[string]error{}
		}
		env.failed[p] = err
		return "", "", err
	}
	env.path, env.version = p, ort.GetVersion()
	return env.path, env.version, nil
}

func sameFile(a, b string) bool {
	sa, err1 := os.Stat(a)
	sb, err2 := os.Stat(b)
	return err1 == nil && err2 == nil && os.SameFile(sa, sb)
}
