package cli

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"

	"github.com/roostfleet/roost/client"
	"github.com/roostfleet/roost/internal/atomicfile"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
	"github.com/roostfleet/roost/snapshot"
)

// snapshotTimeout is how long a snapshot save or restore may take unless
// --timeout is given: states of tens of MiB, and Raft's restore.
const snapshotTimeout = 10 * time.Minute

func newHubSnapshotCommand(o *options) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "snapshot",
		Short: "Save, inspect and restore the hub's replicated state",
		Long: `A snapshot is a copy of the hub's replicated state: every object (servers,
machines, pools, clusters, windows, images, tokens), the CA and the trusted
release keys, as the leader has applied it. Saving needs no downtime.

The file holds the hub CA's private key and the clusters' credentials:
keep it as secret as the hub's data dir. Image artifacts are not in it
(back up DATA_DIR/blobs of a member, or push the releases again).

A restore replaces the whole state of the running hub through Raft, on
every member, with the snapshot's: what changed since it was saved is
lost. Only a snapshot of the same hub (same CA) restores; the members stay
as they are.`,
		Example: `  roostctl hub snapshot save hub-2026-12-01.snap
  roostctl hub snapshot inspect hub-2026-12-01.snap
  roostctl hub snapshot restore hub-2026-12-01.snap`,
		Args: unknownSubcommand,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newHubSnapshotSaveCommand(o), newHubSnapshotInspectCommand(o), newHubSnapshotRestoreCommand(o))
	return cmd
}

func newHubSnapshotSaveCommand(o *options) *cobra.Command {
	var force bool
	cmd := &cobra.Command{
		Use:   "save FILE",
		Short: "Save the hub's replicated state to a file",
		Long: `Save the hub's replicated state, read on the leader after every write it
acknowledged, to FILE (mode 0600; "-" writes to standard output). The state
is checked against its SHA-256 before the file is written; an existing FILE
is replaced only with --force. FILE is checked before anything is fetched:
its directory must exist, and it must not be a directory.`,
		Example: `  roostctl hub snapshot save hub.snap
  roostctl hub snapshot save - | gzip > hub.snap.gz   # inspect and restore read .gz too`,
		Args: exactArgs(1, "the FILE to write"),
		RunE: func(cmd *cobra.Command, args []string) error {
			path := args[0]
			if err := checkSnapshotTarget(path, force, isTerminal(o.Out)); err != nil {
				return err
			}
			ctx, conn, done, err := o.openWithin(cmd.Context(), o.callTimeout(cmd, snapshotTimeout))
			if err != nil {
				return err
			}
			defer done()
			stream, err := conn.hub.SaveSnapshot(ctx, &roostv1.SaveSnapshotRequest{})
			if err != nil {
				return o.wrapCallError(err)
			}
			var bar *progressbar.ProgressBar
			first, data, err := snapshot.Receive(stream, func(n, total uint64) {
				if bar == nil && isTerminal(o.Err) {
					bar = progressbar.NewOptions64(int64(total), progressbar.OptionSetWriter(o.Err), progressbar.OptionSetDescription("snapshot"),
						progressbar.OptionShowBytes(true), progressbar.OptionThrottle(100*time.Millisecond), progressbar.OptionClearOnFinish())
				}
				if bar != nil {
					_ = bar.Set64(int64(n))
				}
			})
			if bar != nil {
				_ = bar.Finish()
			}
			if err != nil {
				return o.wrapCallError(err)
			}
			info := first.GetInfo()
			var buf bytes.Buffer
			if err := snapshot.WriteFile(&buf, info, data); err != nil {
				return err
			}
			if path == "-" {
				_, err := o.Out.Write(buf.Bytes())
				return err
			}
			if err := atomicfile.WriteFile(path, buf.Bytes(), 0o600); err != nil {
				return fmt.Errorf("writing %s: %w", path, unwrapPathError(err))
			}
			fmt.Fprintf(o.Out, "saved the state at index %d (%s, %d objects) to %s\n", info.GetIndex(), formatBytes(int64(info.GetSizeBytes())), objectTotal(info), path)
			return nil
		},
	}
	cmd.Flags().BoolVar(&force, "force", false, "replace FILE if it exists")
	return cmd
}

func newHubSnapshotInspectCommand(o *options) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "inspect FILE",
		Short: "Check a snapshot file and show what it holds",
		Long: `Check that FILE is an intact snapshot (its state matches the SHA-256 saved
with it) and show its Raft index, when and by which hub version it was
taken, the CA it belongs to and how many objects of each kind it holds.
Needs no hub; says whether the CA is the one of the hub roostctl is
configured for. FILE may be gzip-compressed, or "-" for standard input.`,
		Example: `  roostctl hub snapshot inspect hub.snap
  roostctl hub snapshot inspect hub.snap -o json`,
		Args: exactArgs(1, "a snapshot FILE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkTableOutput(output); err != nil {
				return err
			}
			info, _, err := readSnapshotFile(args[0], o.In)
			if err != nil {
				return err
			}
			if output != outTable {
				return writeStructured(o.Out, snapshotInfoJSON(info), output)
			}
			tw := tabwriter.NewWriter(o.Out, 0, 8, 2, ' ', 0)
			fmt.Fprintf(tw, "Index:\t%d\n", info.GetIndex())
			fmt.Fprintf(tw, "Taken:\t%s\n", info.GetTakenAt().AsTime().UTC().Format(time.RFC3339))
			fmt.Fprintf(tw, "Hub version:\t%s\n", info.GetHubVersion())
			fmt.Fprintf(tw, "CA fingerprint:\t%s%s\n", info.GetCaFingerprint(), o.caMatch(info))
			fmt.Fprintf(tw, "Size:\t%s\n", formatBytes(int64(info.GetSizeBytes())))
			fmt.Fprintf(tw, "SHA-256:\t%s (verified)\n", info.GetSha256())
			fmt.Fprintf(tw, "Objects:\t%d\n", objectTotal(info))
			for _, k := range slices.Sorted(maps.Keys(info.GetObjects())) {
				fmt.Fprintf(tw, "  %s:\t%d\n", k, info.GetObjects()[k])
			}
			return tw.Flush()
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", outTable, "output `FORMAT`: table, json or yaml")
	_ = cmd.RegisterFlagCompletionFunc("output", fixedCompletions(outTable, outJSON, outYAML))
	return cmd
}

func newHubSnapshotRestoreCommand(o *options) *cobra.Command {
	var dryRun bool
	cmd := &cobra.Command{
		Use:   "restore FILE",
		Short: "Replace the hub's replicated state with a snapshot",
		Long: `Replace the whole replicated state of the running hub with the state in FILE
(saved by 'roostctl hub snapshot save' from this hub): the leader installs
it through Raft and every member follows. Everything written since the
snapshot was saved is lost; the hub's members stay as they are.

What that undoes is printed as warnings (see --dry-run to see them first):
Servers enrolled since the snapshot are not in it: their agents record them
again with their certificates, and they wait for 'roostctl server approve';
enrollment tokens revoked since are active again, and those created since
are gone; release keys trusted or untrusted since are back as they were.

FILE is checked first (as 'inspect' does; gzip and "-" are read too); a
snapshot of another hub (another CA) is refused. Controllers then act on the
restored state: pools claim or release servers to match it, and agents get
the Revisions it names.`,
		Example: `  # What would a restore undo?
  roostctl hub snapshot restore hub.snap --dry-run

  roostctl hub snapshot restore hub.snap`,
		Args: exactArgs(1, "a snapshot FILE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			info, data, err := readSnapshotFile(args[0], o.In)
			if err != nil {
				return err
			}
			ctx, conn, done, err := o.openWithin(cmd.Context(), o.callTimeout(cmd, snapshotTimeout))
			if err != nil {
				return err
			}
			defer done()
			stream, err := conn.hub.RestoreSnapshot(ctx)
			if err != nil {
				return o.wrapCallError(err)
			}
			// io.EOF: the hub answered before reading it all; CloseAndRecv
			// has its answer.
			if err := snapshot.Send(stream, &roostv1.SnapshotChunk{Info: info, DryRun: dryRun}, data); err != nil && !errors.Is(err, io.EOF) {
				return o.wrapCallError(err)
			}
			resp, err := stream.CloseAndRecv()
			if err != nil {
				if !dryRun && client.OutcomeOf(err, true) == client.Unknown {
					// The hub had the whole state: it may have restored it
					// (restoring the same file again is harmless).
					return &client.OutcomeUnknownError{Err: err}
				}
				return o.wrapCallError(err)
			}
			for _, w := range resp.GetWarnings() {
				fmt.Fprintf(o.Err, "Warning from hub: %s\n", w)
			}
			taken := info.GetTakenAt().AsTime().UTC().Format(time.RFC3339)
			if dryRun {
				fmt.Fprintf(o.Out, "would restore the state saved at index %d (%d objects, taken %s); nothing was changed (dry run)\n",
					info.GetIndex(), objectTotal(info), taken)
				return nil
			}
			fmt.Fprintf(o.Out, "restored the state saved at index %d (%d objects, taken %s); the hub is at index %d\n",
				info.GetIndex(), objectTotal(info), taken, resp.GetIndex())
			return nil
		},
	}
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "check FILE on the hub and print what the restore would undo, without restoring")
	return cmd
}

// callTimeout is --timeout when given, else at least def.
func (o *options) callTimeout(cmd *cobra.Command, def time.Duration) time.Duration {
	if f := cmd.Flags().Lookup("timeout"); f != nil && f.Changed {
		return o.timeout
	}
	return max(def, o.timeout)
}

// readSnapshotFile reads and checks a snapshot file: path, or stdin for
// "-"; gzip-compressed or not. A file that cannot be read or is not an
// intact snapshot is invalid input (exit code 2); the error names it.
func readSnapshotFile(path string, stdin io.Reader) (*roostv1.SnapshotInfo, []byte, error) {
	var r io.Reader = stdin
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return nil, nil, usageErrorf("%s: %v", path, unwrapPathError(err))
		}
		defer f.Close()
		if st, err := f.Stat(); err == nil && st.IsDir() {
			return nil, nil, usageErrorf("%s is a directory: give a snapshot FILE", path)
		}
		r = f
	} else {
		path = "standard input"
	}
	br := bufio.NewReader(r)
	if magic, _ := br.Peek(2); len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, nil, usageErrorf("%s: %v", path, err)
		}
		defer zr.Close()
		r = zr
	} else {
		r = br
	}
	info, data, err := snapshot.ReadFile(r)
	if err != nil {
		return nil, nil, usageError{fmt.Errorf("%s: %w", path, err)}
	}
	return info, data, nil
}

// checkSnapshotTarget checks where `snapshot save` is to write before
// anything is fetched: "-" (not to a terminal), or a FILE that is not a
// directory, in a directory that exists, and that exists only with force.
func checkSnapshotTarget(path string, force, stdoutIsTerminal bool) error {
	switch {
	case path == "":
		return usageErrorf("FILE is empty: give a file name, or - for standard output")
	case path == "-" && stdoutIsTerminal:
		return usageErrorf("a snapshot is binary: redirect standard output (save - > FILE), or give a FILE")
	case path == "-":
		return nil
	}
	if st, err := os.Stat(path); err == nil {
		if st.IsDir() {
			return usageErrorf("%s is a directory: give a file name, e.g. %s", path, filepath.Join(path, "hub.snap"))
		}
		if !force {
			return usageErrorf("%s exists: give another FILE, or --force to replace it", path)
		}
	}
	dir := filepath.Dir(path)
	st, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return usageErrorf("cannot write %s: directory %s does not exist", path, dir)
	case err != nil:
		return usageErrorf("cannot write %s: %v", path, unwrapPathError(err))
	case !st.IsDir():
		return usageErrorf("cannot write %s: %s is not a directory", path, dir)
	}
	return nil
}

// unwrapPathError drops the operation and path of an *os.PathError (which
// may name a temporary file), keeping its cause.
func unwrapPathError(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// caMatch says whether a snapshot's CA is the configured hub's: "" when
// unknown (no configuration), else " (this hub's)" or " (NOT this hub's:
// restore refuses it)".
func (o *options) caMatch(info *roostv1.SnapshotInfo) string {
	cfg, err := o.loadConfig()
	if err != nil || cfg.CertificateAuthority == "" || info.GetCaFingerprint() == "" {
		return ""
	}
	block, _ := pem.Decode([]byte(cfg.CertificateAuthority))
	if block == nil {
		return ""
	}
	sum := sha256.Sum256(block.Bytes)
	if hex.EncodeToString(sum[:]) == info.GetCaFingerprint() {
		return " (this hub's)"
	}
	return " (NOT the CA of the hub roostctl is configured for: restore there refuses it)"
}

// objectTotal is how many objects a snapshot holds.
func objectTotal(info *roostv1.SnapshotInfo) int64 {
	var n int64
	for _, c := range info.GetObjects() {
		n += c
	}
	return n
}

// snapshotJSON is the -o json|yaml form of a snapshot's info.
type snapshotJSON struct {
	Index         uint64           `json:"index" yaml:"index"`
	TakenAt       string           `json:"takenAt" yaml:"takenAt"`
	HubVersion    string           `json:"hubVersion" yaml:"hubVersion"`
	CAFingerprint string           `json:"caFingerprint" yaml:"caFingerprint"`
	SizeBytes     uint64           `json:"sizeBytes" yaml:"sizeBytes"`
	SHA256        string           `json:"sha256" yaml:"sha256"`
	Objects       map[string]int64 `json:"objects" yaml:"objects"`
}

func snapshotInfoJSON(info *roostv1.SnapshotInfo) snapshotJSON {
	objs := info.GetObjects()
	if objs == nil {
		objs = map[string]int64{}
	}
	return snapshotJSON{Index: info.GetIndex(), TakenAt: info.GetTakenAt().AsTime().UTC().Format(time.RFC3339), HubVersion: info.GetHubVersion(),
		CAFingerprint: info.GetCaFingerprint(), SizeBytes: info.GetSizeBytes(), SHA256: info.GetSha256(), Objects: objs}
}
