package boot

import (
	"strings"
	"testing"

	"github.com/roostfleet/roost/internal/cpio"
)

// TestStageExtensions: each extension becomes one more initrd line after
// the config initrd, a content-addressed cpio archive that unpacks the
// image at /etc/extensions/<name>.raw; a second Revision with the same
// image shares the file; Prune removes it once no kept entry names it.
func TestStageExtensions(t *testing.T) {
	e := newESP(t)
	kp, ks := artifact(t, "kubelet.raw", "hsqs kubelet image")
	s := spec(t, 1, "kernel", "initrd")
	s.Extensions = []Extension{{Name: "kubelet", Path: kp, SHA256: ks}}
	if err := e.Stage(s); err != nil {
		t.Fatal(err)
	}
	ext := ContentDir(ks) + "/sysext-kubelet.img"
	entry := read(t, e, "/loader/entries/roost-rev-1+3.conf")
	if !strings.Contains(entry, "initrd /roost/rev-1/config.img\ninitrd "+ext+"\n") {
		t.Fatalf("entry does not load the extension after the config initrd:\n%s", entry)
	}
	files, err := cpio.Read([]byte(read(t, e, ext)))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 1 || string(files["etc/extensions/kubelet.raw"]) != "hsqs kubelet image" {
		t.Fatalf("extension initrd holds %q", files)
	}
	if n := len(read(t, e, ext)); n%512 != 0 {
		t.Fatalf("extension initrd is %d bytes, not padded to 512", n)
	}

	// revision 2 without it; pruning to 2 removes the extension's initrd
	s2 := spec(t, 2, "kernel", "initrd")
	if err := e.Stage(s2); err != nil {
		t.Fatal(err)
	}
	if err := e.Prune(1, 2); err != nil {
		t.Fatal(err)
	}
	if !contains(tree(t, e), ext) {
		t.Fatalf("prune removed an extension a kept entry names: %v", tree(t, e))
	}
	if err := e.Prune(2); err != nil {
		t.Fatal(err)
	}
	if contains(tree(t, e), ext) {
		t.Fatalf("prune kept an extension no entry names: %v", tree(t, e))
	}
}

func TestStageExtensionRefused(t *testing.T) {
	kp, ks := artifact(t, "x.raw", "image")
	for _, tc := range []struct {
		name string
		x    []Extension
		want string
	}{
		{"bad name", []Extension{{Name: "../etc", Path: kp, SHA256: ks}}, `extension name "../etc"`},
		{"bad digest", []Extension{{Name: "x", Path: kp, SHA256: "abc"}}, "want 64 hex digits"},
		{"wrong digest", []Extension{{Name: "x", Path: kp, SHA256: strings.Repeat("0", 64)}}, "sha256 is"},
		{"twice", []Extension{{Name: "x", Path: kp, SHA256: ks}, {Name: "x", Path: kp, SHA256: ks}}, "named twice"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newESP(t)
			s := spec(t, 1, "kernel", "initrd")
			s.Extensions = tc.x
			err := e.Stage(s)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Stage = %v, want an error with %q", err, tc.want)
			}
			for _, f := range tree(t, e) {
				if strings.HasPrefix(f, "/loader/entries/") {
					t.Fatalf("an entry was written: %v", tree(t, e))
				}
			}
		})
	}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
