package cli

import (
	"strings"
	"testing"
)

// TestNetbootURL: 'roostctl netboot url' checks its flags (exit 2), and a
// hub member without --boot-addr refuses a network boot token, saying how
// to turn network boot on (exit 1); nothing is created then. The URL
// itself is tested against a hub with a boot listener in hub/
// (TestNetboot).
func TestNetbootURL(t *testing.T) {
	_, _, run := realHubCLI(t)
	for _, bad := range [][]string{{}, {"--version", "2026.11.0", "--channel", "stable"}, {"--channel", "stable", "--token-ttl", "0"},
		{"--channel", "stable", "--uses", "-1"}, {"--channel", "stable", "-o", "table"}, {"--channel", "stable", "--label", "nokey"}} {
		if r := run(append([]string{"netboot", "url"}, bad...)...); r.code != ExitUsage {
			t.Errorf("netboot url %v: exit %d, want %d\n%s", bad, r.code, ExitUsage, r.err)
		}
	}
	r := run("netboot", "url", "--channel", "stable")
	if r.code != ExitFailed || !strings.Contains(r.err, "--boot-addr") {
		t.Errorf("netboot url on a hub without --boot-addr: exit %d\n%s%s", r.code, r.out, r.err)
	}
	if r := run("token", "list"); r.code != 0 || strings.Count(strings.TrimSpace(r.out), "\n") != 0 {
		t.Errorf("a refused network boot URL left a token:\n%s%s", r.out, r.err)
	}
}
