package sysext

import (
	"encoding/binary"
	"errors"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestInspectNotSquashfs: what is not a (readable) squashfs image is
// refused with ErrNotSquashfs and what the file is instead.
func TestInspectNotSquashfs(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	erofs := make([]byte, 4096)
	binary.LittleEndian.PutUint32(erofs[1024:], 0xE0F5E1E2)
	v3 := make([]byte, 4096)
	copy(v3, "hsqs")
	binary.LittleEndian.PutUint16(v3[28:], 3)
	for _, tc := range []struct {
		name string
		path string
		msg  string
	}{
		{"empty", write("empty", nil), "shorter than a squashfs superblock"},
		{"text", write("text", []byte(strings.Repeat("#!/bin/sh\n", 20))), `it starts with "#!/b", not the squashfs magic "hsqs"`},
		{"erofs", write("erofs", erofs), "it is an erofs image; Roost reads squashfs extensions only"},
		{"squashfs 3", write("v3", v3), "squashfs version 3, want 4"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Inspect(tc.path)
			if !errors.Is(err, ErrNotSquashfs) || !strings.Contains(err.Error(), tc.msg) || !strings.Contains(err.Error(), tc.path) {
				t.Errorf("error %v, want ErrNotSquashfs with %q and the path", err, tc.msg)
			}
		})
	}
	if _, err := Inspect(filepath.Join(dir, "nope")); err == nil || errors.Is(err, ErrNotSquashfs) || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
	if _, err := Inspect(dir); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("directory: %v", err)
	}
}

// TestInspectDamaged: a truncated image and images with damaged bytes are
// refused with ErrNotSquashfs (or ErrBadRelease), never a panic or
// another error.
func TestInspectDamaged(t *testing.T) {
	img := squash(t, map[string]string{kubeletRelease: goodRelease, "usr/bin/kubelet*": strings.Repeat("ELF", 100000), "usr/bin/k": "->kubelet"})
	good, err := os.ReadFile(img)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	trunc := filepath.Join(dir, "trunc.raw")
	used := binary.LittleEndian.Uint64(good[40:]) // mksquashfs pads the file to 4 KiB
	if err := os.WriteFile(trunc, good[:used/2], 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Inspect(trunc); !errors.Is(err, ErrNotSquashfs) || !strings.Contains(err.Error(), "truncated") {
		t.Errorf("truncated: %v", err)
	}
	rng := rand.New(rand.NewSource(7))
	bad := filepath.Join(dir, "bad.raw")
	refused := 0
	for i := 0; i < 300; i++ {
		data := append([]byte(nil), good...)
		for j := 0; j < 1+rng.Intn(8); j++ {
			// Past the superblock's magic and version, anywhere.
			data[4+rng.Intn(len(data)-4)] = byte(rng.Intn(256))
		}
		if err := os.WriteFile(bad, data, 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := Inspect(bad)
		if err != nil {
			refused++
			if !errors.Is(err, ErrNotSquashfs) && !errors.Is(err, ErrBadRelease) {
				t.Fatalf("damaged image %d: error %v wraps neither ErrNotSquashfs nor ErrBadRelease", i, err)
			}
		}
	}
	t.Logf("%d of 300 damaged images refused (the rest hit file data, which a listing does not read)", refused)
}

// TestInspectBadRelease: a release file that is not KEY=VALUE is refused
// naming the file and line.
func TestInspectBadRelease(t *testing.T) {
	_, err := Inspect(squash(t, map[string]string{kubeletRelease: "ID=_any\nthis is not a field\n"}))
	if !errors.Is(err, ErrBadRelease) || !strings.Contains(err.Error(), "/"+kubeletRelease+": line 2") {
		t.Errorf("error %v", err)
	}
}

func TestIsImage(t *testing.T) {
	if !IsImage(squash(t, map[string]string{kubeletRelease: goodRelease})) {
		t.Error("a squashfs image is not an image")
	}
	p := filepath.Join(t.TempDir(), "x.iso")
	if err := os.WriteFile(p, []byte("CD001...."), 0o644); err != nil {
		t.Fatal(err)
	}
	if IsImage(p) || IsImage(filepath.Join(t.TempDir(), "nope")) {
		t.Error("a non-image is an image")
	}
}

// TestInspectDeep: a tree deeper than maxDepth is refused, not walked
// without end.
func TestInspectDeep(t *testing.T) {
	deep := "usr/" + strings.Repeat("d/", maxDepth) + "x"
	_, err := Inspect(squash(t, map[string]string{kubeletRelease: goodRelease, deep: "x"}))
	if !errors.Is(err, ErrNotSquashfs) || !strings.Contains(err.Error(), "directories deep") {
		t.Errorf("error %v", err)
	}
	ok := "usr/" + strings.Repeat("d/", maxDepth-3) + "x"
	if _, err := Inspect(squash(t, map[string]string{kubeletRelease: goodRelease, ok: "x"})); err != nil {
		t.Error(err)
	}
}
