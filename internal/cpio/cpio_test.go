package cpio

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestRoundTrip(t *testing.T) {
	var b bytes.Buffer
	files := []File{{Path: "/usr/share/oem/config.ign", Mode: 0o600, Data: []byte("{}")}, {Path: "etc/x", Mode: 0o644, Data: []byte("hello")}}
	if err := Write(&b, files, 1); err != nil {
		t.Fatal(err)
	}
	got, err := Read(b.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if string(got["usr/share/oem/config.ign"]) != "{}" || string(got["etc/x"]) != "hello" || len(got) != 2 {
		t.Fatalf("got %v", got)
	}
	if b.Len()%512 != 0 {
		t.Error("archive not padded")
	}
	var again bytes.Buffer
	if err := Write(&again, files, 1); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b.Bytes(), again.Bytes()) {
		t.Error("equal inputs gave different bytes")
	}
}

func TestBadPath(t *testing.T) {
	for _, p := range []string{"", "/", "."} {
		if err := Write(&bytes.Buffer{}, []File{{Path: p}}, 0); err == nil {
			t.Errorf("Write(%q) = nil", p)
		}
	}
}

func TestReadRejectsDamage(t *testing.T) {
	var b bytes.Buffer
	if err := Write(&b, []File{{Path: "a/b", Mode: 0o644, Data: []byte("data")}}, 0); err != nil {
		t.Fatal(err)
	}
	good := b.Bytes()
	for name, data := range map[string][]byte{
		"empty":     nil,
		"truncated": good[:150],
		"magic":     append([]byte("070702"), good[6:]...),
		"field":     append(append([]byte{}, good[:6+8*6]...), append([]byte("zzzzzzzz"), good[6+8*7:]...)...),
	} {
		if _, err := Read(data); err == nil {
			t.Errorf("%s: Read = nil error", name)
		}
	}
}

// TestCPIOTool lists the archive with GNU cpio when it is installed.
func TestCPIOTool(t *testing.T) {
	bin, err := exec.LookPath("cpio")
	if err != nil {
		t.Skip("cpio not installed")
	}
	var b bytes.Buffer
	if err := Write(&b, []File{{Path: "/usr/share/oem/config.ign", Mode: 0o600, Data: []byte(`{"ignition":{}}`)}}, 0); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "x.cpio")
	if err := os.WriteFile(p, b.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-t", "--quiet", "-F", p)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("cpio -t: %v", err)
	}
	want := []string{"usr", "usr/share", "usr/share/oem", "usr/share/oem/config.ign"}
	if got := strings.Fields(string(out)); !reflect.DeepEqual(got, want) {
		t.Errorf("cpio -t = %q, want %q", got, want)
	}
}
