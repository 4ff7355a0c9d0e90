package cli

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"

	agentconfig "github.com/roostfleet/roost/agent/config"
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
is replaced only with --force.`,
		Example: `  roostctl hub snapshot save hub.snap
  roostctl hub snapshot save - | gzip > hub.snap.gz`,
		Args: exactArgs(1, "the FILE to write"),
		RunE: func(cmd *cobra.Command, args []string) error {
			path := args[0]
			if path != "-" && !force {
				if _, err := os.Stat(path); err == nil {
					return usageErrorf("%s exists: give another FILE, or --force to replace it", path)
				}
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
			info, data, err := snapshot.Receive(stream, func(n, total uint64) {
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
			var buf bytes.Buffer
			if err := snapshot.WriteFile(&buf, info, data); err != nil {
				return err
			}
			if path == "-" {
				_, err := o.Out.Write(buf.Bytes())
				return err
			}
			if err := agentconfig.WriteFileAtomic(path, buf.Bytes(), 0o600); err != nil {
				return err
			}
			fmt.Fprintf(o.Out, "saved the state at index %d (%s, %s) to %s\n", info.GetIndex(), formatBytes(int64(info.GetSizeBytes())), objectCount(info), path)
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
Needs no hub.`,
		Example: `  roostctl hub snapshot inspect hub.snap
  roostctl hub snapshot inspect hub.snap -o json`,
		Args: exactArgs(1, "a snapshot FILE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			switch output {
			case outTable, outJSON, outYAML:
			default:
				return usageErrorf("--output %q: use table, json or yaml", output)
			}
			info, _, err := readSnapshotFile(args[0])
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
			fmt.Fprintf(tw, "CA fingerprint:\t%s\n", info.GetCaFingerprint())
			fmt.Fprintf(tw, "Size:\t%s\n", formatBytes(int64(info.GetSizeBytes())))
			fmt.Fprintf(tw, "SHA-256:\t%s (verified)\n", info.GetSha256())
			fmt.Fprintf(tw, "Objects:\t%s\n", objectCount(info))
			for _, k := range sortedKinds(info) {
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
	cmd := &cobra.Command{
		Use:   "restore FILE",
		Short: "Replace the hub's replicated state with a snapshot",
		Long: `Replace the whole replicated state of the running hub with the state in FILE
(saved by 'roostctl hub snapshot save' from this hub): the leader installs
it through Raft and every member follows. Everything written since the
snapshot was saved is lost; the hub's members stay as they are.

FILE is checked first (as 'inspect' does); a snapshot of another hub (another
CA) is refused. Controllers then act on the restored state: pools claim or
release servers to match it, and agents get the Revisions it names.`,
		Example: `  roostctl hub snapshot inspect hub.snap   # check what it holds first
  roostctl hub snapshot restore hub.snap`,
		Args: exactArgs(1, "a snapshot FILE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			info, data, err := readSnapshotFile(args[0])
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
			if err := snapshot.Send(stream, info, data); err != nil && err != io.EOF {
				return o.wrapCallError(err)
			}
			resp, err := stream.CloseAndRecv()
			if err != nil {
				return o.wrapCallError(err)
			}
			fmt.Fprintf(o.Out, "restored the state saved at index %d (%s, taken %s); the hub is at index %d\n",
				info.GetIndex(), objectCount(info), info.GetTakenAt().AsTime().UTC().Format(time.RFC3339), resp.GetIndex())
			return nil
		},
	}
	return cmd
}

// callTimeout is --timeout when given, else at least def.
func (o *options) callTimeout(cmd *cobra.Command, def time.Duration) time.Duration {
	if f := cmd.Flags().Lookup("timeout"); f != nil && f.Changed {
		return o.timeout
	}
	return max(def, o.timeout)
}

// readSnapshotFile reads and checks a snapshot file.
func readSnapshotFile(path string) (*roostv1.SnapshotInfo, []byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	info, data, err := snapshot.ReadFile(f)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	return info, data, nil
}

func sortedKinds(info *roostv1.SnapshotInfo) []string {
	var ks []string
	for k := range info.GetObjects() {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// objectCount is "N objects".
func objectCount(info *roostv1.SnapshotInfo) string {
	var n int64
	for _, c := range info.GetObjects() {
		n += c
	}
	return fmt.Sprintf("%d objects", n)
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
