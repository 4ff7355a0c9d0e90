package sysext

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
)

// ErrNoMksquashfs is wrapped by Build's error when mksquashfs is missing,
// does not run, or is older than 4.4.
var ErrNoMksquashfs = errors.New("mksquashfs is not usable")

// mksquashfsFlags make the image a function of the staged tree alone:
// no appending to an old file, reproducible inode order and fragment
// packing, every owner root, every timestamp (and the superblock's) 0, no
// extended attributes, and the compressor and block size pinned at gzip
// (every kernel with squashfs reads it) and 128 KiB whatever the build's
// default.
var mksquashfsFlags = []string{
	"-noappend", "-reproducible", "-all-root", "-mkfs-time", "0", "-all-time", "0", "-no-xattrs",
	"-comp", "gzip", "-b", "131072", "-quiet", "-no-progress",
}

var mksquashfsVersionRE = regexp.MustCompile(`mksquashfs version (\d+)\.(\d+)`)

// findMksquashfs returns the path of mksquashfs in PATH and its version
// ("4.5.1"), or an error wrapping ErrNoMksquashfs that names the Debian
// package. Version 4.4 introduced -reproducible, -mkfs-time and -all-time.
func findMksquashfs() (bin, version string, err error) {
	bin, err = exec.LookPath("mksquashfs")
	if err != nil {
		return "", "", fmt.Errorf("%w: not found in PATH: install the Debian package squashfs-tools (images/deps.sh installs it)", ErrNoMksquashfs)
	}
	out, err := exec.Command(bin, "-version").CombinedOutput()
	m := mksquashfsVersionRE.FindSubmatch(out)
	if err != nil || m == nil {
		return "", "", fmt.Errorf("%w: %s -version: %v %s: reinstall the Debian package squashfs-tools", ErrNoMksquashfs, bin, err, firstLine(out))
	}
	major, _ := strconv.Atoi(string(m[1]))
	minor, _ := strconv.Atoi(string(m[2]))
	version = strings.TrimPrefix(firstLine(out), "mksquashfs version ")
	if major < 4 || major == 4 && minor < 4 {
		return "", "", fmt.Errorf("%w: %s is version %s; reproducible images need 4.4 or newer (Debian 11 or later's squashfs-tools)", ErrNoMksquashfs, bin, version)
	}
	return bin, version, nil
}

// runMksquashfs packs the tree src into the image dst with
// mksquashfsFlags. SOURCE_DATE_EPOCH is removed from its environment:
// mksquashfs refuses it together with -mkfs-time and -all-time, and the
// timestamps are 0 anyway.
func runMksquashfs(bin, src, dst string) error {
	cmd := exec.Command(bin, append([]string{src, dst}, mksquashfsFlags...)...)
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "SOURCE_DATE_EPOCH=") {
			cmd.Env = append(cmd.Env, e)
		}
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("mksquashfs: %v: %s", err, strings.TrimSpace(out.String()))
	}
	return nil
}

func firstLine(b []byte) string {
	s, _, _ := strings.Cut(strings.TrimSpace(string(b)), "\n")
	return s
}
