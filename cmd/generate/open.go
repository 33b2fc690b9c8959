package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/glint-llm/glint"
	"github.com/glint-llm/glint/backend/opencl"
	"github.com/glint-llm/glint/internal/progress"
)

// openModel loads the model named by the flags, with a progress bar on a
// terminal unless quiet.
func openModel(o glint.Options, path string, quiet bool) (*glint.Model, error) {
	var bar *progress.Bar
	if !quiet {
		bar = progress.New("loading " + filepath.Base(path))
		o.Progress = bar.Update
	}
	m, err := glint.Open(path, o)
	bar.Finish()
	if err != nil {
		return nil, err
	}
	if m.TokenizerErr != nil && !quiet {
		fmt.Fprintf(os.Stderr, "no tokenizer (%v): use --prompt-ids and --output ids\n", m.TokenizerErr)
	}
	if !quiet {
		noGPUWarning(m, o.Device)
	}
	return m, nil
}

// noGPUWarning says so when OpenCL, left to choose its device, found no GPU
// and runs on a CPU device (PoCL), and how to register a GPU driver that is
// on the machine but unknown to the OpenCL loader.
func noGPUWarning(m *glint.Model, device string) {
	ob, ok := m.Backend.(*opencl.Backend)
	if !ok || device != "" || ob.Info().Type == "GPU" {
		return
	}
	fmt.Fprintf(os.Stderr, "warning: no OpenCL GPU found: running on %s (%s), which is slower than -b cpu\n", ob.Info().Name, ob.Info().Type)
	fmt.Fprint(os.Stderr, loaderICD().RegisterHint())
}

// loaderICD is where the OpenCL ICD loader finds drivers, as this process's
// environment (OCL_ICD_VENDORS, LD_LIBRARY_PATH) sets it.
func loaderICD() opencl.ICD {
	return opencl.ICD{Vendors: os.Getenv("OCL_ICD_VENDORS"), LibPath: filepath.SplitList(os.Getenv("LD_LIBRARY_PATH"))}
}

// parseIDs reads "1,2,3" (commas or spaces).
func parseIDs(s string) ([]int32, error) {
	var ids []int32
	for _, f := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' }) {
		var v int32
		if _, err := fmt.Sscan(f, &v); err != nil {
			return nil, fmt.Errorf("bad token id %q", f)
		}
		ids = append(ids, v)
	}
	if len(ids) == 0 {
		return nil, fmt.Errorf("no token ids in %q", s)
	}
	return ids, nil
}
