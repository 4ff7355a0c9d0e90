package enrollconfig

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/coreos/ignition/v2/config/v3_3"
	"github.com/vincent-petithory/dataurl"

	agentconfig "github.com/roostfleet/roost/agent/config"
	"github.com/roostfleet/roost/imagebuilder/ignition"
	"github.com/roostfleet/roost/internal/cpio"
)

func testCA(t *testing.T) []byte {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "roost-ca"}, NotBefore: time.Now(),
		NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tpl, tpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// TestInitrdHoldsTheAgentConfig: the config initrd holds the Ignition
// config at ConfigPath (mode 0600), which writes the agent configuration
// with the hubs, the CA and the token, and the extension images under
// ExtensionsDir; equal inputs give equal bytes.
func TestInitrdHoldsTheAgentConfig(t *testing.T) {
	ca := testCA(t)
	p := Params{Hubs: []string{"10.0.2.2:7443", "hub2:7443"}, CA: ca, Token: "abc123.0123456789abcdef"}
	cfg, err := Ignition(p)
	if err != nil {
		t.Fatal(err)
	}
	var a, b bytes.Buffer
	ext := Extension("roost-agent", []byte("hsqs agent"))
	if err := WriteInitrd(&a, cfg, []File{ext}, 0); err != nil {
		t.Fatal(err)
	}
	if err := WriteInitrd(&b, cfg, []File{ext}, 0); err != nil || !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Fatalf("equal inputs gave other bytes (%v)", err)
	}
	files, err := cpio.Read(a.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if string(files["etc/extensions/roost-agent.raw"]) != "hsqs agent" {
		t.Errorf("files %v: no extension at %s/roost-agent.raw", len(files), ExtensionsDir)
	}
	ign, _, err := v3_3.Parse(files[strings.TrimPrefix(ConfigPath, "/")])
	if err != nil {
		t.Fatal(err)
	}
	var ac *agentconfig.AgentConfig
	for _, f := range ign.Storage.Files {
		if f.Path == ignition.AgentConfigPath {
			du, err := dataurl.DecodeString(*f.Contents.Source)
			if err != nil {
				t.Fatal(err)
			}
			if ac, err = agentconfig.Parse(du.Data); err != nil {
				t.Fatal(err)
			}
		}
	}
	if ac == nil || ac.Token != p.Token || strings.Join(ac.Hubs, ",") != "10.0.2.2:7443,hub2:7443" || ac.CABundle != string(ca) {
		t.Fatalf("agent config %+v", ac)
	}
	if err := WriteInitrd(&a, nil, nil, 0); err == nil {
		t.Error("an empty config was written")
	}
}

func TestIgnitionRefusesBadInputs(t *testing.T) {
	ca := testCA(t)
	good := Params{Hubs: []string{"h:7443"}, CA: ca, Token: "abc123.0123456789abcdef"}
	for name, c := range map[string]struct {
		mod  func(*Params)
		want string
	}{
		"token":   {func(p *Params) { p.Token = "nope" }, "token:"},
		"no hubs": {func(p *Params) { p.Hubs = nil }, "no hub endpoints"},
		"hub":     {func(p *Params) { p.Hubs = []string{"h"} }, "hubs:"},
		"ca":      {func(p *Params) { p.CA = []byte("x") }, "hub CA:"},
		"profile": {func(p *Params) { p.NetworkProfile = []byte("{") }, "network profile:"},
	} {
		p := good
		c.mod(&p)
		if _, err := Ignition(p); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", name, err, c.want)
		}
	}
}
