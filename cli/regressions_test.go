package cli

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// Regression tests for problems found by trying roostctl as a new user.

// apply -o yaml wrote "dryrun" (yaml.v3's default field name) while -o json
// wrote "dryRun".
func TestApplyYAMLOutputUsesJSONFieldNames(t *testing.T) {
	f := newFakeHub()
	config, _ := startFakeHub(t, f)
	_, cluster, _ := manifestDir(t)
	r := runCLI(t, "", "--config", config, "apply", "-f", cluster, "--dry-run", "-o", "yaml")
	if r.code != 0 || !strings.HasPrefix(r.out, "dryRun: true\nindex: ") || strings.Contains(r.out, "dryrun") {
		t.Errorf("apply -o yaml: exit %d, out %q, err %q", r.code, r.out, r.err)
	}
}

// A --timeout that ran out before the first call was reported as
// "error: context deadline exceeded" with exit code 2 (bad usage).
func TestTimeoutBeforeFirstCallIsUnreachable(t *testing.T) {
	f := newFakeHub()
	config, _ := startFakeHub(t, f)
	r := runCLI(t, "", "--config", config, "--timeout", "1ns", "get", "pools")
	if r.code != ExitUnreachable || !strings.Contains(r.err, "did not answer in time") || !strings.Contains(r.err, "(--timeout)") {
		t.Errorf("--timeout 1ns: exit %d, err %q", r.code, r.err)
	}
}

// Mistakes in --hub were reported as mistakes in the configuration's
// "hubs[1]".
func TestHubFlagMistakesNameTheFlag(t *testing.T) {
	f := newFakeHub()
	config, addr := startFakeHub(t, f)
	for _, hub := range []string{addr + ",", "nohost", addr + "," + addr, ":7443", "h:99999"} {
		r := runCLI(t, "", "--config", config, "--hub", hub, "get", "pools")
		if r.code != ExitUsage || !strings.HasPrefix(r.err, "error: --hub") || strings.Contains(r.err, "hubs[") {
			t.Errorf("--hub %q: exit %d, err %q", hub, r.code, r.err)
		}
	}
	if r := runCLI(t, "", "--config", config, "--hub", addr, "get", "pools"); r.code != 0 {
		t.Errorf("--hub %s: exit %d, err %q", addr, r.code, r.err)
	}
}

// Run right after `roost-hub --data-dir D &` (as in the README), roostctl
// found no D/admin.conf yet and told the user to go and find one.
func TestMissingConfigInHubDataDirSaysRetry(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "node-id", "hub-1234\n")
	r := runCLI(t, "", "--config", filepath.Join(dir, "admin.conf"), "get", "pools")
	if r.code != ExitUsage || !strings.Contains(r.err, "a new hub writes admin.conf there once it has") || !strings.Contains(r.err, "retry in a few seconds") {
		t.Errorf("exit %d, err %q", r.code, r.err)
	}
}

// A client configuration whose CA is not the hub's (another hub's
// admin.conf) was reported as "hub unreachable ... is roost-hub running
// there?" with exit code 3.
func TestConfigOfAnotherHubIsAConfigurationProblem(t *testing.T) {
	f := newFakeHub()
	_, addr := startFakeHub(t, f)
	other := newTestPKI(t).writeConfig(t, addr)
	r := runCLI(t, "", "--config", other, "get", "pools")
	if r.code != ExitUsage || !strings.Contains(r.err, "TLS with the hub failed") || !strings.Contains(r.err, "is "+other+" the admin.conf of the hub at "+addr) {
		t.Errorf("exit %d, err %q", r.code, r.err)
	}
}

// "no hub leader elected yet; retry" (a member answered) came with the
// hint "is roost-hub running there?".
func TestUnavailableHints(t *testing.T) {
	o := &options{tried: []string{"h:1"}, configSource: "c.conf"}
	for _, tc := range []struct {
		msg, want string
		code      int
	}{
		{"no hub leader elected yet; retry", "more than half of its voters are down", ExitUnreachable},
		{"node is not the leader; retry on another member", "electing a leader", ExitUnreachable},
		{"this member (hub-c) was removed from the hub; its data dir is stale: wipe it and join again with a new token (roostctl hub join)",
			"ask a member that is still in the hub (--hub HOST:PORT)", ExitUnreachable},
		{`connection error: desc = "transport: Error while dialing: dial tcp h:1: connect: connection refused"`, "is roost-hub running there?", ExitUnreachable},
		{`connection error: desc = "transport: authentication handshake failed: tls: failed to verify certificate: x509: certificate signed by unknown authority"`, "not signed by the CA in the client configuration", ExitUsage},
		{`connection error: desc = "error reading server preface: remote error: tls: unknown certificate authority"`, "the hub refused the client certificate", ExitUsage},
	} {
		err := o.wrapCallError(status.Error(codes.Unavailable, tc.msg))
		var b strings.Builder
		printError(&b, err)
		if exitCode(err) != tc.code || !strings.Contains(b.String(), tc.want) {
			t.Errorf("%q: exit %d, printed %q; want exit %d and %q", tc.msg, exitCode(err), b.String(), tc.code, tc.want)
		}
	}
	if err := o.wrapCallError(context.DeadlineExceeded); exitCode(err) != ExitUnreachable {
		t.Errorf("deadline: exit %d", exitCode(err))
	}
}

// The same file named twice (-f a -f a, or -f DIR -f DIR/a) made every object
// in it "defined twice (first at <the same place>)".
func TestReadInputsSameFileTwice(t *testing.T) {
	dir := t.TempDir()
	a := writeFile(t, dir, "a.yaml", clusterYAML)
	o := &options{}
	for _, paths := range [][]string{{a, a}, {dir, a}, {a, filepath.Join(dir, ".", "a.yaml")}} {
		_, err := o.readInputs(paths)
		if exitCode(err) != ExitUsage || !strings.Contains(err.Error(), "given twice") {
			t.Errorf("%v: exit %d, err %v", paths, exitCode(err), err)
		}
	}
}

// `roostctl hub bogus` said `"roostctl hub" takes no arguments`.
func TestHubUnknownSubcommand(t *testing.T) {
	r := runCLI(t, "", "hub", "memebrs")
	if r.code != ExitUsage || !strings.Contains(r.err, `unknown command "memebrs" for "roostctl hub" (did you mean "members"?)`) {
		t.Errorf("exit %d, err %q", r.code, r.err)
	}
}

// `roostctl get pool/workers` (the -o name form) said only: unknown kind.
func TestKindSlashNameSaysHowToWriteIt(t *testing.T) {
	for _, args := range [][]string{{"get", "pool/workers"}, {"describe", "pl/workers", "x"}, {"delete", "pools/workers", "x"}} {
		r := runCLI(t, "", args...)
		if r.code != ExitUsage || !strings.Contains(r.err, "give the kind and the name as two arguments: pool ") {
			t.Errorf("%v: exit %d, err %q", args, r.code, r.err)
		}
	}
}

// delete -f refused manifests whose spec did not validate, although only
// kind and metadata.name matter to it.
func TestDeleteFromManifestWithInvalidSpec(t *testing.T) {
	f := newFakeHub()
	config, _ := startFakeHub(t, f)
	seedObjects(t, f)
	bad := writeFile(t, t.TempDir(), "pool.yaml", strings.Replace(poolYAML, "replicas: 3", "replicas: lots\n  nonsense: 1", 1)+"status: {}\n")
	r := runCLI(t, "", "--config", config, "delete", "-f", bad)
	if r.code != 0 || r.out != "pool/workers deleted\n" {
		t.Errorf("exit %d, out %q, err %q", r.code, r.out, r.err)
	}
	noName := writeFile(t, t.TempDir(), "pool.yaml", "apiVersion: roost.io/v1\nkind: Pool\nmetadata: {}\n")
	r = runCLI(t, "", "--config", config, "delete", "-f", noName)
	if r.code != ExitUsage || !strings.Contains(r.err, noName+":3:1: Pool: metadata.name: is required") {
		t.Errorf("no name: exit %d, out %q, err %q", r.code, r.out, r.err)
	}
}

// `netprofile plan P` without --server exited 1 (as for a hub refusal) with
// no pointer to --help: cobra checks required flags after the command
// counts as started.
func TestMissingRequiredFlagIsUsage(t *testing.T) {
	r := runCLI(t, "", "--config", filepath.Join(t.TempDir(), "none.conf"), "netprofile", "plan", "lacp-vlan100")
	if r.code != ExitUsage || !strings.Contains(r.err, `"server" not set`) || !strings.Contains(r.err, "See 'roostctl netprofile plan --help'") {
		t.Errorf("exit %d, err %q", r.code, r.err)
	}
}

// `server label S a=1 a-` sent both and the hub silently removed the label;
// `token create --label a=b --label a=c` silently kept a=c.
func TestConflictingLabelArgumentsAreUsage(t *testing.T) {
	noConfig := filepath.Join(t.TempDir(), "none.conf")
	for _, args := range [][]string{
		{"server", "label", "s1", "a=1", "a-"},
		{"server", "label", "s1", "a-", "a=1"},
		{"server", "label", "s1", "a=1", "a=2"},
		{"token", "create", "--label", "a=b", "--label", "a=c"},
	} {
		r := runCLI(t, "", append([]string{"--config", noConfig}, args...)...)
		if r.code != ExitUsage || !strings.Contains(r.err, `"a"`) {
			t.Errorf("%v: exit %d, err %q", args, r.code, r.err)
		}
	}
}

// `server cordon nosuch S` stopped at nosuch and left S alone (and `token
// revoke` likewise), unlike get and delete, which go on with the other names.
// `token revoke NAME.SECRET` answered "not found": it now revokes NAME.
func TestServerAndTokenCommandsGoOnAfterARefusedName(t *testing.T) {
	f := newFakeHub()
	f.put(&roostv1.Object{Kind: &roostv1.Object_Server{Server: &roostv1.Server{Metadata: &roostv1.ObjectMeta{Name: "s1"}}}})
	f.put(&roostv1.Object{Kind: &roostv1.Object_EnrollmentToken{EnrollmentToken: &roostv1.EnrollmentToken{Metadata: &roostv1.ObjectMeta{Name: "abcdef"}}}})
	config, _ := startFakeHub(t, f)
	r := runCLI(t, "", "--config", config, "server", "cordon", "nosuch", "s1")
	if r.code != ExitFailed || r.out != "server/s1 cordoned\n" || !strings.Contains(r.err, `Server "nosuch" not found`) {
		t.Errorf("server cordon nosuch s1: exit %d, out %q, err %q", r.code, r.out, r.err)
	}
	r = runCLI(t, "", "--config", config, "token", "revoke", "zzzzzz", "abcdef.0123456789abcdef")
	if r.code != ExitFailed || r.out != "enrollmenttoken/abcdef revoked\n" || !strings.Contains(r.err, `"zzzzzz" not found`) {
		t.Errorf("token revoke: exit %d, out %q, err %q", r.code, r.out, r.err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if want := []string{"nosuch", "s1", "zzzzzz", "abcdef"}; strings.Join(f.updated, ",") != strings.Join(want, ",") {
		t.Errorf("calls for %v, want %v", f.updated, want)
	}
}
