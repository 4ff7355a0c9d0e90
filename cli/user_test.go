package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/roostfleet/roost/client"
)

// TestUserAndAuthCommands creates an operator with roostctl user create,
// uses the configuration it prints, and revokes the user.
func TestUserAndAuthCommands(t *testing.T) {
	_, _, run := realHubCLI(t)
	dir := t.TempDir()

	r := run("user", "create", "jane", "--role", "operator", "--ttl", "24h")
	if r.code != 0 {
		t.Fatalf("user create: %d %s", r.code, r.err)
	}
	janeConf := filepath.Join(dir, "jane.conf")
	if err := os.WriteFile(janeConf, []byte(r.out), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := client.LoadConfig(janeConf); err != nil {
		t.Fatalf("user create printed no client configuration: %v\n%s", err, r.out)
	}
	jane := cliWith(t, janeConf)

	if r := jane("auth", "whoami"); r.code != 0 || !strings.Contains(r.out, "jane") || !strings.Contains(r.out, "operator") {
		t.Errorf("whoami as jane: %d %q %q", r.code, r.out, r.err)
	}
	if r := jane("auth", "can-i", "pause", "rollout"); r.code != 0 || r.out != "yes\n" {
		t.Errorf("can-i pause rollout: %d %q", r.code, r.out)
	}
	if r := jane("auth", "can-i", "create", "user"); r.code != 1 || !strings.HasPrefix(r.out, "no: ") || !strings.Contains(r.out, "admin") {
		t.Errorf("can-i create user: %d %q", r.code, r.out)
	}
	if r := jane("auth", "can-i", "fly", "pool"); r.code != 2 || !strings.Contains(r.err, "verbs on pool: apply, create, delete, get") {
		t.Errorf("can-i fly pool: %d %q", r.code, r.err)
	}
	if r := jane("user", "create", "bob", "--role", "viewer"); r.code != 1 || !strings.Contains(r.err, "may not call") {
		t.Errorf("an operator creates a user: %d %q", r.code, r.err)
	}
	if r := jane("get", "pools"); r.code != 0 {
		t.Errorf("an operator lists pools: %d %q", r.code, r.err)
	}

	if r := run("user", "create", "jane", "--role", "viewer"); r.code != 1 || !strings.Contains(r.err, "already exists") {
		t.Errorf("create jane again: %d %q", r.code, r.err)
	}
	if r := run("user", "create", "bob"); r.code != 2 || !strings.Contains(r.err, "--role") {
		t.Errorf("create without --role: %d %q", r.code, r.err)
	}
	if r := run("user", "renew", "jane", "--file", filepath.Join(dir, "jane2.conf")); r.code != 0 {
		t.Errorf("renew: %d %q", r.code, r.err)
	}
	r = run("user", "list")
	if r.code != 0 || !strings.Contains(r.out, "jane") || !strings.Contains(r.out, "operator") || !strings.Contains(r.out, "Active") {
		t.Errorf("user list: %d %q %q", r.code, r.out, r.err)
	}
	if r := run("user", "list", "-o", "json"); r.code != 0 || !strings.Contains(r.out, `"role": "operator"`) {
		t.Errorf("user list -o json: %d %q", r.code, r.out)
	}

	if r := run("user", "revoke", "jane"); r.code != 0 || !strings.Contains(r.out, "user jane revoked") || !strings.Contains(r.out, "2 certificates") {
		t.Errorf("revoke: %d %q %q", r.code, r.out, r.err)
	}
	if r := jane("get", "pools"); r.code != 1 || !strings.Contains(r.err, "revoked") {
		t.Errorf("a revoked user lists pools: %d %q", r.code, r.err)
	}
	if r := run("user", "list"); !strings.Contains(r.out, "Revoked") {
		t.Errorf("user list after the revocation: %q", r.out)
	}
	if r := run("user", "revoke", "nobody"); r.code != 1 {
		t.Errorf("revoke nobody: %d %q", r.code, r.err)
	}
}

// TestAuditCommand: the admin's writes appear in roostctl audit; a viewer
// may not read it.
func TestAuditCommand(t *testing.T) {
	_, _, run := realHubCLI(t)
	if r := run("user", "create", "bob", "--role", "viewer", "--file", filepath.Join(t.TempDir(), "bob.conf")); r.code != 0 {
		t.Fatalf("user create: %d %q", r.code, r.err)
	}
	r := run("audit", "--kind", "user", "--since", "1h")
	if r.code != 0 || !strings.Contains(r.out, "CreateUser") || !strings.Contains(r.out, "admin") || !strings.Contains(r.out, "OK") {
		t.Errorf("audit: %d %q %q", r.code, r.out, r.err)
	}
	if r := run("audit", "--user", "nobody"); r.code != 0 || !strings.Contains(r.err, "No audit entries") {
		t.Errorf("audit --user nobody: %d %q %q", r.code, r.out, r.err)
	}
	if r := run("audit", "-o", "json"); r.code != 0 || !strings.Contains(r.out, `"method": "/roost.v1.HubService/CreateUser"`) {
		t.Errorf("audit -o json: %d %q", r.code, r.out)
	}
}
