package report

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/glint-llm/glint/backend"
)

// File names written by WriteFiles.
const (
	JSONName = "report.json"
	SVGName  = "report.svg"
)

// WriteFiles writes report.json and report.svg into dir, creating it.
func WriteFiles(dir string, r *Report) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	js, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("report: encode: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, JSONName), append(js, '\n'), 0o644); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	f, err := os.Create(filepath.Join(dir, SVGName))
	if err != nil {
		return fmt.Errorf("report: %w", err)
	}
	if err := WriteSVG(f, r); err != nil {
		f.Close()
		return fmt.Errorf("report: %s: %w", f.Name(), err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	return nil
}

// cell escapes a markdown table cell.
func cell(s string) string {
	s = strings.ReplaceAll(s, "|", `\|`)
	return strings.Join(strings.Fields(s), " ")
}

func ms(v float64) string { return fmt.Sprintf("%.2f", v) }

// WriteTable writes the markdown summary table: one row per backend, the
// skipped and failed ones with their reason in the status column. With
// speculative decoding it adds the timed runs' target passes, tokens per
// pass and accepted/drafted tokens, and says under the table which
// backends turned speculation off, and why.
func WriteTable(w io.Writer, r *Report) error {
	spec := r.Settings.Speculative != nil
	head := "| backend | device | load ms | TTFT ms (median) | TBT ms median | TBT ms p90 | TBT ms min | tok/s | peak RSS MiB | launches/token | device MB/token |"
	align := "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|"
	if spec {
		head += " target passes | tok/pass | accepted/drafted |"
		align += "--:|--:|--:|"
	}
	var sb strings.Builder
	sb.WriteString(head + " status |\n" + align + "---|\n")
	var notes []string
	for _, b := range r.Backends {
		status := b.Status
		if b.Reason != "" {
			status += ": " + firstLine(b.Reason)
		}
		row := []string{b.Backend, cell(b.Device), "—", "—", "—", "—", "—", "—", "—", "—", "—"}
		if b.Status == StatusOK && b.Summary != nil {
			s := b.Summary
			row[2] = fmt.Sprintf("%.0f", float64(b.LoadUs)/1000)
			row[3] = ms(s.TTFTMsMedian)
			row[4], row[5], row[6] = ms(s.TBTMsMedian), ms(s.TBTMsP90), ms(s.TBTMsMin)
			row[7] = fmt.Sprintf("%.1f", s.TokensPerSec)
		}
		if b.Status == StatusOK && b.PeakRSSBytes > 0 {
			row[8] = fmt.Sprintf("%.0f", float64(b.PeakRSSBytes)/(1<<20))
		}
		if b.LaunchesPerToken != nil {
			row[9] = fmt.Sprintf("%.0f", *b.LaunchesPerToken)
		}
		if b.DeviceBytesPerToken != nil {
			row[10] = fmt.Sprintf("%.1f", *b.DeviceBytesPerToken/1e6)
		}
		if spec {
			if s := b.Speculative; b.Status == StatusOK && s != nil {
				row = append(row, fmt.Sprint(s.Passes), fmt.Sprintf("%.2f", s.TokensPerPass), fmt.Sprintf("%d/%d", s.Accepted, s.Drafted))
				if s.Off != "" {
					notes = append(notes, fmt.Sprintf("%s: speculative decoding off (%s)\n", b.Backend, firstLine(s.Off)))
				}
			} else {
				row = append(row, "—", "—", "—")
			}
		}
		row = append(row, cell(status))
		sb.WriteString("| " + strings.Join(row, " | ") + " |\n")
	}
	if len(notes) > 0 {
		sb.WriteString("\n" + strings.Join(notes, ""))
	}
	_, err := io.WriteString(w, sb.String())
	return err
}

// WriteProfileTable writes the per-op tables (milliseconds per generated
// token, then per prompt) for the backends that were profiled; nothing when
// none was.
func WriteProfileTable(w io.Writer, r *Report) error {
	decode := profileTable(r, "ms per generated token by op (separate profiled runs; each op synchronised, so no overlap; OpenCL: device time per launch, fused ones by name):",
		func(p *Profile) map[string]float64 { return p.PerTokenUs })
	tokens := 0 // every backend runs the same prompt
	for _, b := range r.Backends {
		tokens = max(tokens, b.PromptTokens)
	}
	prompt := profileTable(r, fmt.Sprintf("ms per prompt of %d tokens by op, up to the first token (the same runs):", tokens),
		func(p *Profile) map[string]float64 { return p.PromptUs })
	_, err := io.WriteString(w, decode+prompt)
	return err
}

// profileTable is one per-op table of the profiled backends, from the
// times (µs) that of picks; "" when no backend has them.
func profileTable(r *Report, title string, of func(*Profile) map[string]float64) string {
	var profiles []map[string]float64
	for _, b := range r.Backends {
		if b.Profile != nil {
			profiles = append(profiles, of(b.Profile))
		}
	}
	kinds := backend.Kinds(profiles...)
	var rows []string
	for _, b := range r.Backends {
		if b.Profile == nil || len(of(b.Profile)) == 0 {
			continue
		}
		row := []string{b.Backend}
		var total float64
		for _, k := range kinds {
			us := of(b.Profile)[k]
			total += us
			row = append(row, fmt.Sprintf("%.3f", us/1000))
		}
		row = append(row, fmt.Sprintf("%.3f", total/1000))
		rows = append(rows, "| "+strings.Join(row, " | ")+" |\n")
	}
	if len(rows) == 0 {
		return ""
	}
	var sb strings.Builder
	sb.WriteString("\n" + title + "\n\n")
	sb.WriteString("| backend | " + strings.Join(kinds, " | ") + " | total |\n")
	sb.WriteString("|---|" + strings.Repeat("--:|", len(kinds)+1) + "\n")
	for _, r := range rows {
		sb.WriteString(r)
	}
	return sb.String()
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}
