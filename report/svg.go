package report

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
)

// palette colours backends in report order (colour-blind-safe Tableau hues).
var palette = []string{"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b"}

func esc(s string) string {
	var b bytes.Buffer
	xml.EscapeText(&b, []byte(s))
	return b.String()
}

// niceScale returns an axis top and tick step covering max with 4–10 ticks
// at 1, 2 or 5 times a power of ten.
func niceScale(max float64) (top, step float64) {
	if !(max > 0) || math.IsInf(max, 0) {
		return 1, 0.2
	}
	raw := max / 5
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		step = m * p
		if step >= raw {
			break
		}
	}
	return math.Ceil(max/step) * step, step
}

func fmtTick(v, step float64) string {
	if step >= 1 {
		return fmt.Sprintf("%.0f", v)
	}
	d := int(math.Ceil(-math.Log10(step)))
	return fmt.Sprintf("%.*f", d, v)
}

// plot is a rectangle of the chart with a linear y axis from 0 to top.
type plot struct {
	x, y, w, h float64
	top, step  float64
}

func (p plot) yOf(v float64) float64 { return p.y + p.h - v/p.top*p.h }

// axes draws the frame, the y ticks with grid lines and the labels.
func (p plot) axes(sb *strings.Builder, title, yLabel, xLabel string) {
	fmt.Fprintf(sb, `<text x="%.1f" y="%.1f" class="title">%s</text>`+"\n", p.x, p.y-12, esc(title))
	for v := 0.0; v <= p.top+p.step/2; v += p.step {
		y := p.yOf(v)
		fmt.Fprintf(sb, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" class="grid"/>`+"\n", p.x, y, p.x+p.w, y)
		fmt.Fprintf(sb, `<text x="%.1f" y="%.1f" class="tick" text-anchor="end">%s</text>`+"\n", p.x-6, y+4, fmtTick(v, p.step))
	}
	fmt.Fprintf(sb, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" class="axis"/>`+"\n", p.x, p.y, p.x, p.y+p.h)
	fmt.Fprintf(sb, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" class="axis"/>`+"\n", p.x, p.y+p.h, p.x+p.w, p.y+p.h)
	fmt.Fprintf(sb, `<text transform="translate(%.1f %.1f) rotate(-90)" class="label" text-anchor="middle">%s</text>`+"\n",
		p.x-48, p.y+p.h/2, esc(yLabel))
	fmt.Fprintf(sb, `<text x="%.1f" y="%.1f" class="label" text-anchor="middle">%s</text>`+"\n", p.x+p.w/2, p.y+p.h+40, esc(xLabel))
}

// bar is one backend's median with its min–max whisker.
type bar struct {
	name, color string
	med, lo, hi float64
}

func (p plot) bars(sb *strings.Builder, kind string, bs []bar) {
	slot := p.w / float64(len(bs))
	bw := math.Min(slot*0.5, 80)
	for i, b := range bs {
		cx := p.x + slot*(float64(i)+0.5)
		fmt.Fprintf(sb, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s" data-kind="%s"><title>%s %s median %.2f ms (min %.2f, max %.2f)</title></rect>`+"\n",
			cx-bw/2, p.yOf(b.med), bw, p.yOf(0)-p.yOf(b.med), b.color, kind, esc(b.name), kind, b.med, b.lo, b.hi)
		ylo, yhi := p.yOf(b.lo), p.yOf(b.hi)
		fmt.Fprintf(sb, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" class="whisker"/>`+"\n", cx, ylo, cx, yhi)
		for _, y := range []float64{ylo, yhi} {
			fmt.Fprintf(sb, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" class="whisker"/>`+"\n", cx-bw/4, y, cx+bw/4, y)
		}
		fmt.Fprintf(sb, `<text x="%.1f" y="%.1f" class="tick" text-anchor="middle">%s</text>`+"\n", cx, p.y+p.h+16, esc(b.name))
		fmt.Fprintf(sb, `<text x="%.1f" y="%.1f" class="value" text-anchor="middle">%.2f</text>`+"\n", cx, yhi-6, b.med)
	}
}

// WriteSVG draws the report: TTFT and TBT per backend as bars (median) with
// min–max whiskers, and the per-token latency over the generation (median
// across runs at each token) as one line per backend. Every line is a
// <polyline data-backend="NAME">; nothing else carries data-backend.
func WriteSVG(w io.Writer, r *Report) error {
	const W, H = 960.0, 760.0
	var ok []Backend
	var skipped []string
	colors := map[string]string{}
	for _, b := range r.Backends {
		if b.Status == StatusOK && b.Summary != nil {
			colors[b.Backend] = palette[len(ok)%len(palette)]
			ok = append(ok, b)
		} else {
			skipped = append(skipped, fmt.Sprintf("%s %s: %s", b.Backend, b.Status, firstLine(b.Reason)))
		}
	}

	var sb strings.Builder
	fmt.Fprintf(&sb, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" font-family="sans-serif">`+"\n", W, H, W, H)
	sb.WriteString(`<style>.title{font-size:15px;font-weight:bold}.label{font-size:13px}.tick{font-size:11px;fill:#333}.value{font-size:10px;fill:#333}` +
		`.grid{stroke:#e4e4e4}.axis{stroke:#333}.whisker{stroke:#222;stroke-width:1.5}.note{font-size:11px;fill:#555}</style>` + "\n")
	fmt.Fprintf(&sb, `<rect width="%.0f" height="%.0f" fill="#fff"/>`+"\n", W, H)
	title := "glint: latency per backend"
	fmt.Fprintf(&sb, `<text x="20" y="26" class="title">%s</text>`+"\n", esc(title))
	sub := fmt.Sprintf("%s · %s/%s · %d cores · %d tokens × %d runs (greedy, after 1 warm-up) · %s",
		r.Machine.CPUModel, r.Machine.OS, r.Machine.Arch, r.Machine.Cores, r.Settings.NPredict, r.Settings.Runs, r.Created.Format("2006-01-02"))
	fmt.Fprintf(&sb, `<text x="20" y="46" class="note">%s</text>`+"\n", esc(sub))

	if len(ok) == 0 {
		fmt.Fprintf(&sb, `<text x="20" y="100" class="label">no backend produced timings</text>`+"\n")
	} else {
		var ttft, tbt []bar
		var maxTTFT, maxTBT float64
		for _, b := range ok {
			s := b.Summary
			ttft = append(ttft, bar{b.Backend, colors[b.Backend], s.TTFTMsMedian, s.TTFTMsMin, s.TTFTMsMax})
			tbt = append(tbt, bar{b.Backend, colors[b.Backend], s.TBTMsMedian, s.TBTMsMin, s.TBTMsMax})
			maxTTFT = math.Max(maxTTFT, s.TTFTMsMax)
			maxTBT = math.Max(maxTBT, s.TBTMsMax)
		}
		pa := plot{x: 90, y: 100, w: 360, h: 230}
		pa.top, pa.step = niceScale(maxTTFT)
		pa.axes(&sb, "Time to first token (prefill included)", "TTFT (ms)", "backend (bar: median, whisker: min–max over runs)")
		pa.bars(&sb, "ttft", ttft)
		pb := plot{x: 570, y: 100, w: 360, h: 230}
		pb.top, pb.step = niceScale(maxTBT)
		pb.axes(&sb, "Time between tokens", "TBT (ms)", "backend (bar: median, whisker: min–max over all gaps)")
		pb.bars(&sb, "tbt", tbt)

		pc := plot{x: 90, y: 420, w: 660, h: 230}
		lines := map[string][]float64{}
		var maxLine float64
		n := 0
		for _, b := range ok {
			l := perIndexMedian(b.GapsUs)
			lines[b.Backend] = l
			n = max(n, len(l))
			for _, v := range l {
				maxLine = math.Max(maxLine, v)
			}
		}
		pc.top, pc.step = niceScale(maxLine)
		pc.axes(&sb, "Latency of each generated token (median across runs)", "time since previous token (ms)", "generated token")
		// x: gap i is the time to token i+2 (token 1 is the TTFT).
		xOf := func(i int) float64 {
			if n <= 1 {
				return pc.x + pc.w/2
			}
			return pc.x + float64(i)/float64(n-1)*pc.w
		}
		for _, i := range xTicks(n) {
			fmt.Fprintf(&sb, `<text x="%.1f" y="%.1f" class="tick" text-anchor="middle">%d</text>`+"\n", xOf(i), pc.y+pc.h+16, i+2)
		}
		for _, b := range ok {
			var pts []string
			for i, v := range lines[b.Backend] {
				pts = append(pts, fmt.Sprintf("%.1f,%.1f", xOf(i), pc.yOf(v)))
			}
			fmt.Fprintf(&sb, `<polyline data-backend="%s" points="%s" fill="none" stroke="%s" stroke-width="2"/>`+"\n",
				esc(b.Backend), strings.Join(pts, " "), colors[b.Backend])
		}
		// Legend.
		lx, ly := pc.x+pc.w+24, pc.y+10
		// The backend on one line, its device below it in small type, so
		// that long device names stay inside the picture.
		for i, b := range ok {
			y := ly + float64(i)*36
			fmt.Fprintf(&sb, `<rect x="%.1f" y="%.1f" width="14" height="14" fill="%s"/>`+"\n", lx, y-11, colors[b.Backend])
			fmt.Fprintf(&sb, `<text x="%.1f" y="%.1f" class="label">%s</text>`+"\n", lx+20, y, esc(b.Backend))
			if b.Device != "" {
				fmt.Fprintf(&sb, `<text x="%.1f" y="%.1f" class="note">%s</text>`+"\n", lx+20, y+14, esc(truncate(b.Device, 24)))
			}
		}
	}
	for i, s := range skipped {
		fmt.Fprintf(&sb, `<text x="20" y="%.1f" class="note">%s</text>`+"\n", H-16-float64(len(skipped)-1-i)*15, esc(truncate(s, 150)))
	}
	sb.WriteString("</svg>\n")
	_, err := io.WriteString(w, sb.String())
	return err
}

// xTicks picks up to about 10 evenly spaced gap indices, always the last.
func xTicks(n int) []int {
	if n <= 0 {
		return nil
	}
	step := max(1, int(math.Ceil(float64(n)/10)))
	var ts []int
	for i := 0; i < n; i += step {
		ts = append(ts, i)
	}
	if !slices.Contains(ts, n-1) {
		if len(ts) > 1 && n-1-ts[len(ts)-1] < step/2 {
			ts = ts[:len(ts)-1]
		}
		ts = append(ts, n-1)
	}
	return ts
}

func truncate(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
