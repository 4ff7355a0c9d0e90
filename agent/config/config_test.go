package config

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func testCA(t *testing.T) string {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "ca"},
		NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}

func TestRoundTrip(t *testing.T) {
	ca := testCA(t)
	path := filepath.Join(t.TempDir(), "etc", "roost", "agent.yaml")
	want := &AgentConfig{Hubs: []string{"10.0.0.1:7443", "[fd00::2]:7443"}, CABundle: ca, Token: "abcdef.0123456789abcdef", StateDir: "/var/lib/roost"}
	if err := want.Write(path); err != nil {
		t.Fatal(err)
	}
	if want.APIVersion != "" {
		t.Error("Write modified its receiver")
	}
	st, _ := os.Stat(path)
	if st.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600 (the file holds the token)", st.Mode().Perm())
	}
	got, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	want.APIVersion, want.Kind = APIVersion, Kind
	if !reflect.DeepEqual(got, want) {
		t.Errorf("round trip:\n got %+v\nwant %+v", got, want)
	}
	data, _ := os.ReadFile(path)
	for _, s := range []string{"apiVersion: roost.io/v1", "kind: AgentConfig", "hubs:", "caBundle: |", "token: abcdef.0123456789abcdef", "stateDir: /var/lib/roost"} {
		if !strings.Contains(string(data), s) {
			t.Errorf("file lacks %q:\n%s", s, data)
		}
	}
	if b, err := got.CA(); err != nil || string(b) != ca {
		t.Errorf("CA: %v", err)
	}
	if got.StateDirOrDefault() != "/var/lib/roost" || (&AgentConfig{}).StateDirOrDefault() != DefaultStateDir {
		t.Error("StateDirOrDefault")
	}
}

func TestCAFileRelative(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "hub-ca.pem"), []byte(testCA(t)), 0o644)
	path := filepath.Join(dir, "agent.yaml")
	os.WriteFile(path, []byte("apiVersion: roost.io/v1\nkind: AgentConfig\ncaFile: hub-ca.pem\n"), 0o600)
	c, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if c.CAFile != filepath.Join(dir, "hub-ca.pem") {
		t.Errorf("caFile %q", c.CAFile)
	}
	if b, err := c.CA(); err != nil || len(b) == 0 {
		t.Errorf("CA: %v", err)
	}
	c.CAFile = filepath.Join(dir, "missing.pem")
	if _, err := c.CA(); err == nil || !strings.Contains(err.Error(), "caFile") {
		t.Errorf("missing caFile: %v", err)
	}
	os.WriteFile(filepath.Join(dir, "bad.pem"), []byte("junk"), 0o644)
	c.CAFile = filepath.Join(dir, "bad.pem")
	if _, err := c.CA(); err == nil || !strings.Contains(err.Error(), "no PEM certificate") {
		t.Errorf("bad caFile: %v", err)
	}
}

func TestLoadErrors(t *testing.T) {
	ca := testCA(t)
	indented := "  " + strings.ReplaceAll(strings.TrimSpace(ca), "\n", "\n  ")
	head := "apiVersion: roost.io/v1\nkind: AgentConfig\n"
	for _, tc := range []struct{ name, body, want string }{
		{"minimal", head, ""},
		{"full", head + "hubs: [h1:7443, h2:7443]\ncaBundle: |\n" + indented + "\ntoken: abcdef.0123456789abcdef\nstateDir: /x\n", ""},
		{"unknown field", head + "hub: h1:7443\n", `unknown field "hub"`},
		{"wrong kind", "apiVersion: roost.io/v1\nkind: Config\n", `kind: got "Config", want "AgentConfig"`},
		{"wrong apiVersion", "apiVersion: v2\nkind: AgentConfig\n", `apiVersion: got "v2"`},
		{"bad hub", head + "hubs: [h1]\n", `hubs[0]: address "h1" is not host:port`},
		{"bad port", head + "hubs: [h1:0]\n", `hubs[0]: address "h1:0" has an invalid port`},
		{"no host", head + "hubs: [':7443']\n", `has no host`},
		{"duplicate hub", head + "hubs: [h:1, h:1]\n", `hubs[1]: duplicate address`},
		{"bad token", head + "token: secret\n", "token: not an enrollment token"},
		{"upper-case token", head + "token: ABCDEF.0123456789abcdef\n", "token: not an enrollment token"},
		{"both CAs", head + "caFile: /x\ncaBundle: |\n" + indented + "\n", "caBundle and caFile: give one, not both"},
		{"bad CA", head + "caBundle: not pem\n", "caBundle: no PEM certificate found"},
		{"not yaml", "::: [", "error converting YAML"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "agent.yaml")
			os.WriteFile(path, []byte(tc.body), 0o600)
			_, err := Load(path)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Load: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v does not name the file and %q", err, tc.want)
			}
		})
	}
	if _, err := Load(filepath.Join(t.TempDir(), "nope.yaml")); err == nil || !strings.Contains(err.Error(), "nope.yaml") {
		t.Errorf("missing file: %v", err)
	}
	if err := (&AgentConfig{Token: "bad"}).Write(filepath.Join(t.TempDir(), "a.yaml")); err == nil {
		t.Error("Write accepted an invalid config")
	}
}

func TestValidToken(t *testing.T) {
	for s, want := range map[string]bool{"abcdef.0123456789abcdef": true, "abcde.0123456789abcdef": false, "abcdef0123456789abcdef": false, "abcdef.0123456789abcdeg0": false, "": false} {
		if ValidToken(s) != want {
			t.Errorf("ValidToken(%q) != %v", s, want)
		}
	}
}
