package imagebuilder

import (
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/roostfleet/roost/imagebuilder/iso"
	"github.com/roostfleet/roost/imagebuilder/sysext"
)

// testExtension builds extension name at version shipping one file at
// dest, signed with key when key is not nil, and returns the .raw path.
func testExtension(t *testing.T, name, version, dest string, key ed25519.PrivateKey) string {
	t.Helper()
	if _, err := exec.LookPath("mksquashfs"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("mksquashfs missing under CI (images/deps.sh installs squashfs-tools): %v", err)
		}
		t.Skipf("skipping: %v (install squashfs-tools)", err)
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "payload")
	if err := os.WriteFile(src, []byte("#!/bin/sh\necho "+name+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	raw := filepath.Join(dir, name+"-"+version+".raw")
	info, err := sysext.Build(sysext.Options{Name: name, Version: version, Files: []sysext.FileSpec{{Src: src, Dest: dest}}}, raw)
	if err != nil {
		t.Fatal(err)
	}
	if key != nil {
		if _, err := sysext.WriteManifest(raw, sysext.ManifestFor(info, filepath.Base(raw)), key); err != nil {
			t.Fatal(err)
		}
	}
	return raw
}

func TestLoadExtensions(t *testing.T) {
	_, signer, signerPEM := newReleaseKey(t)
	_, _, otherPEM := newReleaseKey(t)
	agent := testExtension(t, "roost-agent", "0.4.0", "/usr/bin/roost-agent", signer)
	tools := testExtension(t, "site-tools", "1.0", "/usr/bin/site-tool", signer)

	files, versions, err := loadExtensions([]string{tools, agent}, []string{signerPEM})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 2 || files[0].Path != "/etc/extensions/roost-agent.raw" || files[1].Path != "/etc/extensions/site-tools.raw" || files[0].Mode != 0o644 {
		t.Fatalf("files = %+v, want roost-agent.raw then site-tools.raw under /etc/extensions, mode 0644", files)
	}
	if want, _ := os.ReadFile(agent); string(files[0].Data) != string(want) {
		t.Fatal("the unpacked roost-agent.raw is not the image given")
	}
	if versions["roost-agent"] != "0.4.0" || versions["site-tools"] != "1.0" {
		t.Fatalf("versions = %v", versions)
	}

	bad := func(what string, paths, keys []string, want string) {
		t.Helper()
		_, _, err := loadExtensions(paths, keys)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err = %v, want one containing %q", what, err, want)
		}
	}
	bad("another key", []string{agent}, []string{otherPEM}, "is not signed by a --release-key")
	bad("unsigned", []string{testExtension(t, "unsigned", "1", "/usr/bin/unsigned", nil)}, []string{signerPEM}, "has no manifest")
	bad("same path twice", []string{agent, testExtension(t, "other-agent", "1", "/usr/bin/roost-agent", nil)}, nil, "/usr/bin/roost-agent")
	notImage := filepath.Join(t.TempDir(), "x.raw")
	if err := os.WriteFile(notImage, []byte("not squashfs"), 0o644); err != nil {
		t.Fatal(err)
	}
	bad("not an image", []string{notImage}, nil, "x.raw")
	bad("missing", []string{filepath.Join(t.TempDir(), "nope.raw")}, nil, "nope.raw")
}

func TestEnrollCarriesAgentExtension(t *testing.T) {
	_, signer, signerPEM := newReleaseKey(t)
	agent := testExtension(t, "roost-agent", "0.4.0", "/usr/bin/roost-agent", signer)
	b := testBundle(t, signer)
	o := EnrollOptions{Release: b.Dir, Hubs: []string{"10.0.0.1:7443"}, CA: []byte(testCA(t)), Token: "abcdef.0123456789abcdef",
		ReleaseKeys: []string{signerPEM}, Extensions: []string{agent}}
	spec, err := prepare(o)
	if err != nil {
		t.Fatal(err)
	}
	if len(spec.ConfigInitrdFiles) != 1 || spec.ConfigInitrdFiles[0].Path != "/etc/extensions/roost-agent.raw" {
		t.Fatalf("config initrd files = %v, want /etc/extensions/roost-agent.raw", spec.ConfigInitrdFiles)
	}
	var info Info
	for _, f := range spec.Files {
		if f.Path == InfoPath {
			if err := json.Unmarshal(f.Data, &info); err != nil {
				t.Fatal(err)
			}
		}
	}
	if info.Extensions["roost-agent"] != "0.4.0" {
		t.Fatalf("image info extensions = %v", info.Extensions)
	}
	var cpio strings.Builder
	if err := iso.WriteCPIO(&cpio, spec.ConfigInitrdFiles, 0); err != nil {
		t.Fatal(err)
	}
	got, err := iso.ReadCPIO([]byte(cpio.String()))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := got["etc/extensions/roost-agent.raw"]; !ok {
		t.Fatalf("cpio holds %d files, not etc/extensions/roost-agent.raw", len(got))
	}
}

func TestCheckAgent(t *testing.T) {
	withAgent := map[string]string{"roost-agent": "0.4.0"}
	for _, c := range []struct {
		name       string
		versions   map[string]string
		components map[string]string
		refused    bool
	}{
		{"agent extension", withAgent, map[string]string{"kernel": "6.1"}, false},
		{"agent baked into the OS", nil, map[string]string{"kernel": "6.1", "roost-agent": "0.3.0"}, false},
		{"components unknown", nil, nil, false},
		{"no agent anywhere", map[string]string{"kubelet": "v1.34.4"}, map[string]string{"kernel": "6.1"}, true},
	} {
		err := checkAgent(c.versions, c.components)
		if refused := errors.Is(err, ErrNoAgent); refused != c.refused {
			t.Errorf("%s: err = %v, refused want %v", c.name, err, c.refused)
		}
		if err != nil && !strings.Contains(err.Error(), "--extension roost-agent-V.raw") {
			t.Errorf("%s: %v does not say how to fix it", c.name, err)
		}
	}
}
