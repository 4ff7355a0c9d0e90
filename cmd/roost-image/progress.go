package main

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/mattn/go-isatty"
	"github.com/schollz/progressbar/v3"
)

// progress shows long steps: a bar on a terminal, else a line per 10%.
type progress struct {
	mu    sync.Mutex
	w     io.Writer
	tty   bool
	quiet bool
	step  string
	bar   *progressbar.ProgressBar
	start time.Time
	last  int64 // last reported tenth (lines)
}

func newProgress(w io.Writer, quiet bool) *progress {
	tty := false
	if f, ok := w.(*os.File); ok {
		tty = isatty.IsTerminal(f.Fd())
	}
	return &progress{w: w, tty: tty, quiet: quiet}
}

// Report is an iso.Progress.
func (p *progress) Report(step string, done, total int64) {
	if p.quiet {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if step != p.step {
		p.finish()
		p.step, p.start, p.last = step, time.Now(), -1
		if p.tty && total > 0 {
			p.bar = progressbar.NewOptions64(total, progressbar.OptionSetWriter(p.w), progressbar.OptionSetDescription(step),
				progressbar.OptionShowBytes(true), progressbar.OptionThrottle(100*time.Millisecond), progressbar.OptionClearOnFinish())
		}
	}
	if p.bar != nil {
		_ = p.bar.Set64(done)
		return
	}
	if total <= 0 {
		return
	}
	tenth := done * 10 / total
	if tenth != p.last && time.Since(p.start) > time.Second || (tenth == 10 && p.last != 10 && time.Since(p.start) > time.Second) {
		p.last = tenth
		fmt.Fprintf(p.w, "%s: %d%% (%.1f of %.1f MiB)\n", step, tenth*10, float64(done)/(1<<20), float64(total)/(1<<20))
	}
}

func (p *progress) finish() {
	if p.bar != nil {
		_ = p.bar.Finish()
		p.bar = nil
	}
}

// Done closes the last bar.
func (p *progress) Done() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.finish()
}
