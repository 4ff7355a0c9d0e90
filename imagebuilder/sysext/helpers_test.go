package sysext

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// needMksquashfs skips a test that runs mksquashfs when it is missing,
// except under CI (CI set), where a missing squashfs-tools is a failure:
// CI must run every test.
func needMksquashfs(t testing.TB) {
	t.Helper()
	if _, _, err := findMksquashfs(); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%v (CI is set, so this is a failure: the CI machine must have squashfs-tools; images/deps.sh installs it)", err)
		}
		t.Skipf("skipping: %v (install squashfs-tools to run this test)", err)
	}
}

// mkTree writes a tree under dir: a key ending in "/" is a directory, a
// value starting with "->" a symbolic link to the rest, a key ending in
// "*" an executable file (the "*" is dropped), anything else a 0644 file.
func mkTree(t testing.TB, dir string, tree map[string]string) {
	t.Helper()
	for p, v := range tree {
		full := filepath.Join(dir, filepath.FromSlash(strings.TrimSuffix(p, "*")))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		var err error
		switch {
		case strings.HasSuffix(p, "/"):
			err = os.MkdirAll(full, 0o755)
		case strings.HasPrefix(v, "->"):
			err = os.Symlink(strings.TrimPrefix(v, "->"), full)
		case strings.HasSuffix(p, "*"):
			err = os.WriteFile(full, []byte(v), 0o755)
		default:
			err = os.WriteFile(full, []byte(v), 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// squash packs a hand-made tree (mkTree's format) with mksquashfs, as a
// bad image nobody would build with Build, and returns the image's path.
func squash(t testing.TB, tree map[string]string) string {
	t.Helper()
	needMksquashfs(t)
	dir := t.TempDir()
	root := filepath.Join(dir, "root")
	if err := os.Mkdir(root, 0o755); err != nil {
		t.Fatal(err)
	}
	mkTree(t, root, tree)
	bin, _, err := findMksquashfs()
	if err != nil {
		t.Fatal(err)
	}
	img := filepath.Join(dir, "image.raw")
	if err := runMksquashfs(bin, root, img); err != nil {
		t.Fatal(err)
	}
	return img
}

// releaseOf is an extension-release file for a hand-made tree.
func releaseOf(lines ...string) string { return strings.Join(lines, "\n") + "\n" }
