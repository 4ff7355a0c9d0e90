package agent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// JournalQuery selects systemd journal entries the way journalctl's
// options do.
type JournalQuery struct {
	// Units keeps only these units' entries (journalctl -u, once per
	// unit); empty: every entry.
	Units []string
	// Since leaves out older entries (journalctl --since); zero: none left
	// out.
	Since time.Time
	// Boot is the boot to read, as journalctl -b takes it: 0 this boot,
	// -1 the one before, and so on.
	Boot int
	// Lines keeps only the last Lines entries (journalctl -n); 0: all.
	Lines int
	// Follow keeps reading new entries until the context ends
	// (journalctl -f).
	Follow bool
	// JSON writes one JSON object per entry and line (journalctl -o json)
	// instead of short-iso text.
	JSON bool
}

// Journal reads the host's systemd journal. Read writes the entries q
// selects to w as text, one line per entry, and returns when they are
// written (with Follow, when ctx ends: then it returns nil), or with the
// error of w, or when the journal cannot be read. The real one runs
// journalctl (Journalctl); tests use a fake.
type Journal interface {
	Read(ctx context.Context, q JournalQuery, w io.Writer) error
}

// Journalctl reads the journal with journalctl -o short-iso (or -o json).
// This boot's journal is the local one (journalctl --boot=0). An earlier
// boot's is read from PersistentDir (--directory, all its machine-ID
// directories): the OS runs from RAM and draws a new machine ID at each
// boot, so the journals of earlier boots, kept on the STATE partition, are
// each under an ID of their own, which journalctl --boot does not look at
// otherwise (and refuses with --merge). There --boot=-1 counts back from
// the newest boot in those files: this one, once journald has flushed its
// journal there early in the boot.
type Journalctl struct {
	// Path is the journalctl binary; empty: "journalctl" from $PATH.
	Path string
	// PersistentDir holds the journals of every boot; empty:
	// DefaultJournalDir.
	PersistentDir string
}

// Args returns journalctl's arguments for q.
func (j Journalctl) Args(q JournalQuery) []string {
	output := "short-iso"
	if q.JSON {
		output = "json"
	}
	args := []string{"--no-pager", "--quiet", "--output=" + output, "--boot=" + strconv.Itoa(q.Boot)}
	if q.Boot != 0 {
		args = append(args, "--directory="+j.persistentDir())
	}
	for _, u := range q.Units {
		args = append(args, "--unit="+u)
	}
	if !q.Since.IsZero() {
		args = append(args, "--since=@"+strconv.FormatInt(q.Since.Unix(), 10))
	}
	if q.Lines > 0 {
		args = append(args, "--lines="+strconv.Itoa(q.Lines))
	}
	if q.Follow {
		args = append(args, "--follow")
	}
	return args
}

func (j Journalctl) persistentDir() string {
	if j.PersistentDir != "" {
		return j.PersistentDir
	}
	return DefaultJournalDir
}

// maxJournalctlStderr bounds what is kept of journalctl's standard error
// for the error message.
const maxJournalctlStderr = 4 << 10

// Read implements Journal. A failure of journalctl is an error with its
// exit status and the start of its standard error.
func (j Journalctl) Read(ctx context.Context, q JournalQuery, w io.Writer) error {
	path := j.Path
	if path == "" {
		path = "journalctl"
	}
	if q.Boot != 0 {
		if _, err := os.Stat(j.persistentDir()); err != nil {
			return fmt.Errorf("no journal of earlier boots on this server (%v): only installed servers keep one (the enrollment image keeps its journal in memory)", err)
		}
	}
	cmd := exec.CommandContext(ctx, path, j.Args(q)...)
	stderr := &cappedBuffer{max: maxJournalctlStderr}
	cmd.Stdout, cmd.Stderr = w, stderr
	cmd.WaitDelay = 5 * time.Second
	err := cmd.Run()
	if ctx.Err() != nil && q.Follow {
		return nil // the reader went away: following ends there
	}
	if err == nil {
		return nil
	}
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return fmt.Errorf("journalctl %s: %v: %s", strings.Join(cmd.Args[1:], " "), err, strings.TrimSpace(stderr.String()))
	}
	return fmt.Errorf("journalctl: %w", err)
}

// cappedBuffer keeps the first max bytes written to it and drops the rest
// (Truncated says so), never failing a write.
type cappedBuffer struct {
	bytes.Buffer
	max       int
	Truncated bool
}

func (b *cappedBuffer) Write(p []byte) (int, error) {
	if room := b.max - b.Len(); room < len(p) {
		b.Truncated = true
		if room > 0 {
			b.Buffer.Write(p[:room])
		}
		return len(p), nil
	}
	return b.Buffer.Write(p)
}

// onReadJournal starts reading the journal for the hub (ReadJournal).
// since_ago counts back from the agent's clock, so that the CLI's and the
// Server's clocks need not agree.
func (s *session) onReadJournal(req *roostv1.ReadJournal) {
	p := newDataParams(req.GetRequestId(), req.GetMaxBytes(), req.GetChunkBytes(), req.GetWindow())
	q := JournalQuery{Units: req.GetUnits(), Boot: int(req.GetBoot()), Lines: int(req.GetLines()), Follow: req.GetFollow(), JSON: req.GetJson()}
	switch {
	case req.GetSinceAgo() != nil:
		q.Since = s.clock.Now().Add(-req.GetSinceAgo().AsDuration())
	case req.GetSince() != nil:
		q.Since = req.GetSince().AsTime()
	}
	j := s.a.o.Journal
	s.startData(p, func(ctx context.Context, w io.Writer) error {
		if j == nil {
			return errNoJournal
		}
		return j.Read(ctx, q, w)
	})
}
