package cli

import (
	"archive/tar"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// bundleTimeout bounds server bundle (unless --timeout is given): the
// agent runs a dozen programs and sends up to 64 MiB.
const bundleTimeout = 10 * time.Minute

// bundleErrorsEntry is the bundle's list of what could not be collected
// (agent.BundleErrors; roostctl does not link the agent).
const bundleErrorsEntry = "errors.txt"

func newServerBundleCommand(o *options) *cobra.Command {
	var (
		file  string
		force bool
	)
	cmd := &cobra.Command{
		Use:   "bundle NAME",
		Short: "Save a support bundle of a server (tar.gz)",
		Long: `Save a support bundle of a server: a tar.gz its agent collects and sends
through its own connection to the hub, holding

  journal/this-boot.log, journal/previous-boot.log   the last 50,000 journal
                                  entries of this boot and of the one before
  agent/state.json                the agent's state, certificate validity and
                                  reported conditions (never its key)
  agent/inventory.json            the hardware inventory it reports
  boot/bootctl-list.txt           the boot loader's entries (bootctl list)
  boot/loader-entries/*.conf      the Boot Loader Specification entries on the ESP
  network/ip-*.json               addresses, links and routes (ip -j)
  dmesg.txt                       the kernel's ring buffer
  units/kubelet-containerd-status.txt, units/failed.txt
                                  systemctl status of the kubelet and
                                  containerd, and the failed units
  errors.txt                      every entry that could not be collected,
                                  was cut (8 MiB per entry) or left out

A part that cannot be collected never fails the bundle: errors.txt says why.
The bundle is at most 64 MiB. FILE is written when the whole bundle has
arrived (mode 0600: it may hold secrets); "-" writes it to standard output.
Like 'server logs', it takes the operator or admin role and is audited.`,
		Example: `  roostctl server bundle 4c4c4544-0042-3510-8052-b4c04f4d4e31 -o bundle.tar.gz
  roostctl server bundle 4c4c4544-0042-3510-8052-b4c04f4d4e31 -o - | tar -tzv`,
		Args:              exactArgs(1, "a server NAME"),
		ValidArgsFunction: o.argCompletions(false, objectNames("Server")),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			if file == "" {
				file = "roost-bundle-" + cleanServerName(name) + "-" + time.Now().UTC().Format("20060102T150405Z") + ".tar.gz"
			}
			if err := checkBundleTarget(file, force, isTerminal(o.Out)); err != nil {
				return err
			}
			ctx, conn, done, err := o.openWithin(cmd.Context(), o.callTimeout(cmd, bundleTimeout))
			if err != nil {
				return err
			}
			defer done()
			stream, err := conn.hub.CollectServerBundle(ctx, &roostv1.CollectServerBundleRequest{Server: name})
			if err != nil {
				return o.wrapCallError(err)
			}
			if file == "-" {
				if _, err := copyServerData(o.Out, stream); err != nil {
					return o.wrapCallError(err)
				}
				return nil
			}
			tmp, err := os.CreateTemp(filepath.Dir(file), "."+filepath.Base(file)+".*")
			if err != nil {
				return fmt.Errorf("writing %s: %w", file, unwrapPathError(err))
			}
			defer os.Remove(tmp.Name()) // after the rename: nothing
			truncated, err := copyServerData(tmp, stream)
			if cerr := tmp.Close(); err == nil && cerr != nil {
				err = fmt.Errorf("writing %s: %w", file, cerr)
			}
			if err != nil {
				return o.wrapCallError(err)
			}
			if err := os.Rename(tmp.Name(), file); err != nil {
				return fmt.Errorf("writing %s: %w", file, unwrapPathError(err))
			}
			sum, err := summarizeBundle(file)
			if err != nil {
				return fmt.Errorf("the bundle in %s is damaged: %w", file, err)
			}
			fmt.Fprintf(o.Out, "saved the support bundle of server %s to %s (%s, %s)\n", name, file, formatBytes(sum.size), sum.entriesText())
			if sum.problems != "" {
				fmt.Fprintf(o.Out, "%s:\n%s", bundleErrorsEntry, indent(sum.problems))
			}
			if truncated {
				fmt.Fprintln(o.Err, "Warning: the bundle was cut at the hub's bound of 64 MiB: it is incomplete")
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&file, "output", "o", "", "the `FILE` to write (\"-\": standard output; default roost-bundle-NAME-TIME.tar.gz here)")
	cmd.Flags().BoolVar(&force, "force", false, "replace FILE if it exists")
	return cmd
}

// checkBundleTarget checks FILE before anything is fetched: not a
// directory, not an existing file without force, in a directory that
// exists; "-" only when standard output is not a terminal.
func checkBundleTarget(path string, force, stdoutIsTerminal bool) error {
	switch {
	case path == "-" && stdoutIsTerminal:
		return usageErrorf("a bundle is binary: redirect standard output (-o - > FILE), or give a FILE")
	case path == "-":
		return nil
	}
	if st, err := os.Stat(path); err == nil {
		if st.IsDir() {
			return usageErrorf("%s is a directory: give a file name, e.g. %s", path, filepath.Join(path, "bundle.tar.gz"))
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

// bundleSummary is what summarizeBundle found in a bundle file.
type bundleSummary struct {
	size     int64
	entries  int
	problems string // errors.txt, unless it says every entry was collected
}

func (s bundleSummary) entriesText() string {
	if s.entries == 1 {
		return "1 entry"
	}
	return fmt.Sprintf("%d entries", s.entries)
}

// summarizeBundle reads a bundle through: its size, its entries and the
// problems errors.txt lists.
func summarizeBundle(path string) (bundleSummary, error) {
	var sum bundleSummary
	f, err := os.Open(path)
	if err != nil {
		return sum, err
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil {
		sum.size = st.Size()
	}
	gz, err := gzip.NewReader(f)
	if err != nil {
		return sum, err
	}
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return sum, nil
		}
		if err != nil {
			return sum, err
		}
		sum.entries++
		if h.Name == bundleErrorsEntry {
			b, err := io.ReadAll(io.LimitReader(tr, 1<<20))
			if err != nil {
				return sum, err
			}
			if s := string(b); !strings.HasPrefix(s, "every entry was collected") {
				sum.problems = s
			}
		}
	}
}

// indent indents every line of s by two spaces.
func indent(s string) string {
	lines := strings.SplitAfter(s, "\n")
	var b strings.Builder
	for _, l := range lines {
		if l != "" {
			b.WriteString("  " + l)
		}
	}
	return b.String()
}
