package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/roostfleet/roost/apierror"
)

// allCommands returns every command of the tree, hidden ones included.
func allCommands(root *cobra.Command) []*cobra.Command {
	out := []*cobra.Command{root}
	for _, c := range root.Commands() {
		out = append(out, allCommands(c)...)
	}
	return out
}

func TestHelpOfEveryCommand(t *testing.T) {
	root := NewRootCommand(Streams{})
	seen := 0
	for _, c := range allCommands(root) {
		if c.Name() == "help" {
			continue
		}
		path := strings.Fields(c.CommandPath())[1:]
		t.Run(strings.Join(append([]string{"roostctl"}, path...), "_"), func(t *testing.T) {
			if c.Short == "" || c.Long == "" || c.Example == "" {
				t.Errorf("%s: Short, Long and Example must all be set", c.CommandPath())
			}
			r := runCLI(t, "", append(path, "--help")...)
			if r.code != 0 {
				t.Fatalf("--help exited %d: %s", r.code, r.err)
			}
			if !strings.Contains(r.out, "Examples:") || !strings.Contains(r.out, "roostctl ") {
				t.Errorf("%s --help shows no example:\n%s", c.CommandPath(), r.out)
			}
			if !strings.Contains(r.out, c.Short) && !strings.Contains(r.out, firstLine(c.Long)) {
				t.Errorf("%s --help shows neither Short nor Long:\n%s", c.CommandPath(), r.out)
			}
			c.Flags().VisitAll(func(f *pflagFlag) {
				if len(f.Usage) < 10 {
					t.Errorf("%s --%s: flag help %q teaches nothing", c.CommandPath(), f.Name, f.Usage)
				}
			})
		})
		seen++
	}
	if seen < 12 {
		t.Errorf("only %d commands; the tree lost some", seen)
	}
}

type pflagFlag = pflag.Flag

func firstLine(s string) string { return strings.SplitN(s, "\n", 2)[0] }

func TestRootHelpDocumentsExitCodes(t *testing.T) {
	r := runCLI(t, "")
	if r.code != 0 {
		t.Fatalf("roostctl without arguments exited %d", r.code)
	}
	for _, want := range []string{"Exit codes", "0  success", "1  the hub refused", "2  bad usage", "3  hub unreachable", "apply", "get", "describe", "delete", "hub", "version", "completion"} {
		if !strings.Contains(r.out, want) {
			t.Errorf("root help lacks %q:\n%s", want, r.out)
		}
	}
	if strings.Contains(r.out, "docs ") && strings.Contains(r.out, "Write the Markdown") {
		t.Errorf("the hidden docs command shows in the help")
	}
}

func TestGlobalFlags(t *testing.T) {
	o := &options{Streams: Streams{Out: &strings.Builder{}, Err: &strings.Builder{}}, timeout: 30 * time.Second, now: time.Now}
	root := newRootCommand(o)
	root.SetArgs([]string{"--hub", "a:1,b:2", "--hub", "c:3", "--timeout", "5s", "-v", "--config", "/x/y", "version", "--client"})
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(o.hubs, " "); got != "a:1 b:2 c:3" {
		t.Errorf("hubs = %q", got)
	}
	if o.timeout != 5*time.Second || !o.verbose || o.configPath != "/x/y" {
		t.Errorf("timeout %s, verbose %t, config %q", o.timeout, o.verbose, o.configPath)
	}

	// Defaults.
	o = &options{Streams: Streams{Out: &strings.Builder{}, Err: &strings.Builder{}}, timeout: 30 * time.Second, now: time.Now}
	root = newRootCommand(o)
	root.SetArgs([]string{"version", "--client"})
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	if o.timeout != 30*time.Second || o.verbose || o.configPath != "" || len(o.hubs) != 0 {
		t.Errorf("defaults: %+v", o)
	}
}

func TestCommandFlags(t *testing.T) {
	root := NewRootCommand(Streams{})
	for _, tc := range []struct {
		args []string
		flag string
		want string
	}{
		{[]string{"apply", "-f", "a.yaml", "-f", "dir/", "--dry-run"}, "filename", "[a.yaml,dir/]"},
		{[]string{"apply", "-f", "a.yaml", "--dry-run"}, "dry-run", "true"},
		{[]string{"get", "pools", "-o", "wide", "-l", "env=prod", "--stale", "-w"}, "output", "wide"},
		{[]string{"get", "pools", "-l", "env=prod"}, "selector", "env=prod"},
		{[]string{"get", "pools", "--stale"}, "stale", "true"},
		{[]string{"get", "pools", "-w"}, "watch", "true"},
		{[]string{"get", "pools"}, "output", "table"},
		{[]string{"delete", "-f", "-", "--ignore-not-found"}, "ignore-not-found", "true"},
		{[]string{"hub", "join"}, "ttl", "1h0m0s"},
		{[]string{"hub", "join", "--ttl", "24h", "--uses", "3"}, "uses", "3"},
		{[]string{"hub", "members", "-o", "json"}, "output", "json"},
		{[]string{"version", "--client"}, "client", "true"},
	} {
		cmd, rest, err := root.Find(tc.args)
		if err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		// Find leaves flags in rest; parse them on a fresh copy of the tree.
		fresh, _, _ := NewRootCommand(Streams{}).Find(tc.args)
		if err := fresh.ParseFlags(rest); err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		f := fresh.Flags().Lookup(tc.flag)
		if f == nil {
			t.Fatalf("%s has no --%s", cmd.CommandPath(), tc.flag)
		}
		if got := f.Value.String(); got != tc.want {
			t.Errorf("%v: --%s = %q, want %q", tc.args, tc.flag, got, tc.want)
		}
	}
}

func TestUsageErrorsExit2(t *testing.T) {
	dir := t.TempDir()
	noConfig := filepath.Join(dir, "none")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"frobnicate"}, `unknown command "frobnicate"`},
		{[]string{"get"}, "needs a KIND"},
		{[]string{"get", "flurbs"}, `unknown kind "flurbs"`},
		{[]string{"get", "pools", "--nope"}, "unknown flag: --nope"},
		{[]string{"get", "pools", "-o", "xml"}, `--output "xml"`},
		{[]string{"get", "pools", "a", "-l", "x=y"}, "not both"},
		{[]string{"get", "pools", "-l", "x=(", "--config", noConfig}, "--selector"},
		{[]string{"describe", "pool"}, "needs KIND and NAME"},
		{[]string{"apply"}, "no manifests given"},
		{[]string{"apply", "-f", filepath.Join(dir, "missing.yaml")}, "no such file"},
		{[]string{"apply", "-f", "x.yaml", "extra"}, "takes no arguments"},
		{[]string{"apply", "-f", "-", "-o", "table"}, `--output "table"`},
		{[]string{"delete"}, "nothing to delete"},
		{[]string{"delete", "pool"}, "give the names"},
		{[]string{"delete", "pool", "x", "-f", "a.yaml"}, "not both"},
		{[]string{"hub", "remove"}, "needs the member ID"},
		{[]string{"hub", "remove", ""}, `"roostctl hub remove": argument 1 is empty`},
		{[]string{"token", "revoke", "abc", ""}, `"roostctl token revoke": argument 2 is empty`},
		{[]string{"hub", "join", "--uses", "0"}, "--uses 0"},
		{[]string{"hub", "join", "--ttl", "0s"}, "--ttl"},
		{[]string{"completion", "tcsh"}, `invalid argument "tcsh"`},
		{[]string{"--timeout", "0s", "version", "--client"}, "--timeout must be positive"},
		{[]string{"get", "pools", "--config", noConfig}, "no client configuration at " + noConfig},
	} {
		r := runCLI(t, "", tc.args...)
		if r.code != ExitUsage {
			t.Errorf("%v: exit %d, want 2 (stderr %q)", tc.args, r.code, r.err)
		}
		if !strings.Contains(r.err, tc.want) || !strings.HasPrefix(r.err, "error: ") {
			t.Errorf("%v: stderr %q, want an error: line containing %q", tc.args, r.err, tc.want)
		}
	}
}

func TestKindAliases(t *testing.T) {
	for alias, want := range map[string]string{
		"pool": "Pool", "pools": "Pool", "pl": "Pool", "Pool": "Pool", "POOLS": "Pool",
		"cluster": "Cluster", "clusters": "Cluster", "cl": "Cluster",
		"mc": "MachineClass", "machineclasses": "MachineClass", "MachineClass": "MachineClass",
		"np": "NetworkProfile", "netprofile": "NetworkProfile",
		"mw": "MaintenanceWindow", "windows": "MaintenanceWindow",
		"srv": "Server", "servers": "Server", "m": "Machine", "machines": "Machine",
		"ir": "ImageRelease", "images": "ImageRelease", "et": "EnrollmentToken", "tokens": "EnrollmentToken",
		"lease": "Lease", "ls": "Lease",
	} {
		k, err := lookupKind(alias)
		if err != nil {
			t.Errorf("%q: %v", alias, err)
			continue
		}
		if k.Name != want {
			t.Errorf("%q is %s, want %s", alias, k.Name, want)
		}
	}
	_, err := lookupKind("poolz")
	if exitCode(err) != ExitUsage || !strings.Contains(err.Error(), "known kinds") {
		t.Errorf("unknown kind: exit %d, %v", exitCode(err), err)
	}
}

func TestExitCodeFromGRPCCodes(t *testing.T) {
	for c, want := range map[codes.Code]int{
		codes.OK:                 0,
		codes.NotFound:           1,
		codes.FailedPrecondition: 1,
		codes.AlreadyExists:      1,
		codes.PermissionDenied:   1,
		codes.Unauthenticated:    1,
		codes.Internal:           1,
		codes.Unknown:            1,
		codes.Aborted:            1,
		codes.Canceled:           1,
		codes.InvalidArgument:    2,
		codes.OutOfRange:         2,
		codes.Unavailable:        3,
		codes.DeadlineExceeded:   3,
	} {
		if got := exitCodeOf(c); got != want {
			t.Errorf("exitCodeOf(%s) = %d, want %d", c, got, want)
		}
		if c == codes.OK {
			continue
		}
		err := status.Error(c, "boom")
		if got := exitCode(err); got != want {
			t.Errorf("exitCode(status %s) = %d, want %d", c, got, want)
		}
		// Wrapped, and as an *apierror.Error.
		if got := exitCode(fmt.Errorf("ctx: %w", err)); got != want {
			t.Errorf("exitCode(wrapped %s) = %d, want %d", c, got, want)
		}
		if got := exitCode(&apierror.Error{Code: c, Message: "x"}); got != want {
			t.Errorf("exitCode(apierror %s) = %d, want %d", c, got, want)
		}
	}
	for _, tc := range []struct {
		err  error
		want int
	}{
		{nil, 0},
		{errors.New("plain"), 1},
		{usageErrorf("bad flag"), 2},
		{reportedError{3}, 3},
		{fmt.Errorf("x: %w", reportedError{2}), 2},
		{cobraUsage{errors.New("unknown command")}, 2},
		{context.DeadlineExceeded, 3},
		{context.Canceled, 1},
		{unreachableHint{hint: "tried", err: status.Error(codes.Unavailable, "down")}, 3},
	} {
		if got := exitCode(tc.err); got != tc.want {
			t.Errorf("exitCode(%v) = %d, want %d", tc.err, got, tc.want)
		}
	}
}

func TestPrintError(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{apierror.NotFound("Pool", "x"), "Error from hub: Pool \"x\" not found\n"},
		{status.Error(codes.NotFound, `Pool "x" not found`), "Error from hub: Pool \"x\" not found\n"},
		{apierror.Invalid("invalid objects",
			apierror.Violation{Field: "objects[0].spec.cluster", Message: "is required", Hint: "name it"},
			apierror.Violation{Field: "objects[1].metadata.name", Message: "bad"}),
			"Error from hub: invalid objects\n  objects[0].spec.cluster: is required (name it)\n  objects[1].metadata.name: bad\n"},
		{apierror.FailedPreconditionFields("Server s1 is not claimed by any Machine",
			apierror.Violation{Field: "servers[0]", Message: "Server s1 is not claimed by any Machine"}),
			"Error from hub: servers[0]: Server s1 is not claimed by any Machine\n"},
		{unreachableHint{hint: "tried a:1", err: status.Error(codes.Unavailable, "connection refused")},
			"error: hub unreachable: connection refused\n  tried a:1\n"},
		{status.Error(codes.DeadlineExceeded, "context deadline exceeded"), "error: hub did not answer in time: context deadline exceeded\n"},
		{usageErrorf("bad"), "error: bad\n"},
		{errors.New("disk full"), "error: disk full\n"},
	} {
		var b strings.Builder
		printError(&b, tc.err)
		if b.String() != tc.want {
			t.Errorf("printError(%v):\n got %q\nwant %q", tc.err, b.String(), tc.want)
		}
	}
}

func TestCompletionScripts(t *testing.T) {
	for _, sh := range []string{"bash", "zsh", "fish", "powershell"} {
		r := runCLI(t, "", "completion", sh)
		if r.code != 0 || !strings.Contains(r.out, "roostctl") {
			t.Errorf("completion %s: exit %d, %d bytes, stderr %q", sh, r.code, len(r.out), r.err)
		}
	}
}

func TestDocsCommand(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cli")
	r := runCLI(t, "", "docs", dir)
	if r.code != 0 {
		t.Fatalf("docs: exit %d: %s", r.code, r.err)
	}
	for _, f := range []string{"roostctl.md", "roostctl_apply.md", "roostctl_get.md", "roostctl_hub_members.md", "roostctl_hub_join.md", "roostctl_completion.md"} {
		data, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Errorf("docs did not write %s: %v", f, err)
			continue
		}
		if !strings.Contains(string(data), "### Examples") {
			t.Errorf("%s has no examples", f)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "roostctl_docs.md")); err == nil {
		t.Errorf("the hidden docs command was documented")
	}
	// Deterministic: a second run writes the same bytes.
	dir2 := filepath.Join(t.TempDir(), "cli")
	runCLI(t, "", "docs", dir2)
	a, _ := os.ReadFile(filepath.Join(dir, "roostctl_get.md"))
	b, _ := os.ReadFile(filepath.Join(dir2, "roostctl_get.md"))
	if string(a) != string(b) {
		t.Errorf("docs differ between runs")
	}
}

func TestVersionClient(t *testing.T) {
	r := runCLI(t, "", "version", "--client")
	if r.code != 0 || !strings.HasPrefix(r.out, "Client: roostctl ") || strings.Contains(r.out, "Hub:") {
		t.Errorf("version --client: exit %d, out %q, err %q", r.code, r.out, r.err)
	}
}

func TestVersionWithoutHub(t *testing.T) {
	r := runCLI(t, "", "version", "--config", filepath.Join(t.TempDir(), "none"))
	if r.code != 0 || !strings.Contains(r.out, "Hub:    not reachable") {
		t.Errorf("version without a hub: exit %d, out %q, err %q", r.code, r.out, r.err)
	}
}
