package boot

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"strings"
	"unicode"

	"github.com/roostfleet/roost/internal/cpio"
)

// DefaultTries is how many boots a staged entry gets before systemd-boot
// gives up on it; MaxTries bounds StageSpec.Tries.
const (
	DefaultTries = 3
	MaxTries     = 99
)

// ConfigPath is where the config initrd puts the Ignition config: the OEM
// config path Flatcar's initramfs reads.
const ConfigPath = "/usr/share/oem/config.ign"

// RevisionArg is the kernel argument naming the booted revision
// (roost.revision=N); Stage appends it, BootedRevision reads it back.
const RevisionArg = "roost.revision"

// ErrRevisionConflict is returned (wrapped) by Stage when a revision
// already staged and booted has different content: revisions are
// immutable.
var ErrRevisionConflict = errors.New("revision already staged with different content")

// StageSpec is one Revision to stage on the ESP.
type StageSpec struct {
	Revision int64  // N ≥ 1
	Title    string // menu title; default "Roost revision N"; one line
	// KernelPath and InitrdPath are local files the agent downloaded and
	// verified; KernelSHA256 and InitrdSHA256 are their sha256 digests
	// (64 hex digits), checked again while copying.
	KernelPath, InitrdPath     string
	KernelSHA256, InitrdSHA256 string
	Ignition                   []byte   // the Revision's Ignition config (JSON)
	KernelArgs                 []string // before roost.revision=N; no newlines
	Tries                      int      // boot tries; 0 means DefaultTries
	// Extensions are the systemd-sysext images the Revision boots with,
	// each loaded as one more initrd after the config initrd, in order.
	Extensions []Extension
}

// Stage writes revision s.Revision to the ESP (layout in the package doc):
// it copies the kernel and the initrd to /roost/<hash>/ (skipped when a
// file of the right size is there; the copy is checked against the
// digest), writes /roost/rev-N/config.img, a newc cpio archive holding
// usr/share/oem/config.ign, and last loader/entries/roost-rev-N+T.conf,
// each file written under a temporary name, fsynced and renamed.
//
// Staging a revision that already has an entry, in any counter state,
// with the same content does nothing but restore missing files. When the
// content differs and systemd-boot never booted the entry, Stage removes
// the entry first and restages; when it was booted or blessed, Stage fails
// with ErrRevisionConflict. It fails on a malformed spec, a digest
// mismatch or a write error.
func (e ESP) Stage(s StageSpec) error {
	if err := e.stage(s); err != nil {
		return fmt.Errorf("stage revision %d: %w", s.Revision, err)
	}
	return nil
}

func (e ESP) stage(s StageSpec) error {
	s, err := s.normalize()
	if err != nil {
		return err
	}
	entry := s.entry()
	// The boot loader loads both initrds back to back and the kernel finds
	// a cpio header only at an offset divisible by 4; zero bytes before it
	// are skipped (init/initramfs.c). So the config initrd starts with as
	// many zeros as the image initrd's size needs to reach that alignment.
	st, err := os.Stat(s.InitrdPath)
	if err != nil {
		return err
	}
	var config bytes.Buffer
	config.Write(make([]byte, ConfigPadding(st.Size())))
	if err := cpio.Write(&config, []cpio.File{{Path: ConfigPath, Mode: 0o600, Data: s.Ignition}}, 0); err != nil {
		return err
	}
	all, err := e.Entries()
	if err != nil {
		return err
	}
	if old := revisionEntries(all, s.Revision); len(old) > 0 {
		same := e.sameContent(old, entry, config.Bytes())
		booted := false
		for _, en := range old {
			booted = booted || en.Blessed() || en.Booted()
		}
		switch {
		case same:
			// Leave the entry and its counter alone; put back files a
			// mistaken Prune removed.
			return e.stageFiles(s, config.Bytes())
		case booted:
			return fmt.Errorf("%w: entry %s was booted", ErrRevisionConflict, old[0].Name)
		}
		// Never booted: take the old entry away before its files change.
		if err := e.removeEntries(old); err != nil {
			return err
		}
	}
	if err := e.stageFiles(s, config.Bytes()); err != nil {
		return err
	}
	name := EntryName(s.Revision, s.Tries)
	return writeAtomic(e.entryPath(name), strings.NewReader(entry), 0o644, nil)
}

// normalize checks s and fills in defaults.
func (s StageSpec) normalize() (StageSpec, error) {
	if s.Revision < 1 {
		return s, fmt.Errorf("revision %d: must be at least 1", s.Revision)
	}
	if s.Title == "" {
		s.Title = fmt.Sprintf("Roost revision %d", s.Revision)
	}
	if strings.IndexFunc(s.Title, unicode.IsControl) >= 0 {
		return s, fmt.Errorf("title %q holds control characters", s.Title)
	}
	for _, d := range []*string{&s.KernelSHA256, &s.InitrdSHA256} {
		*d = strings.ToLower(*d)
		if b, err := hex.DecodeString(*d); err != nil || len(b) != sha256.Size {
			return s, fmt.Errorf("sha256 %q: want 64 hex digits", *d)
		}
	}
	if s.KernelPath == "" || s.InitrdPath == "" {
		return s, fmt.Errorf("kernel and initrd paths are required")
	}
	if !json.Valid(s.Ignition) {
		return s, fmt.Errorf("the Ignition config is not valid JSON")
	}
	for _, a := range s.KernelArgs {
		if a == "" || strings.IndexFunc(a, unicode.IsControl) >= 0 {
			return s, fmt.Errorf("kernel argument %q: empty or holds control characters", a)
		}
		if k, _, _ := strings.Cut(a, "="); k == RevisionArg {
			return s, fmt.Errorf("kernel argument %q: Stage adds %s itself", a, RevisionArg)
		}
	}
	seen := map[string]bool{}
	for i := range s.Extensions {
		x := &s.Extensions[i]
		x.SHA256 = strings.ToLower(x.SHA256)
		if err := x.check(); err != nil {
			return s, err
		}
		if seen[x.Name] {
			return s, fmt.Errorf("extension %s: named twice", x.Name)
		}
		seen[x.Name] = true
	}
	if s.Tries == 0 {
		s.Tries = DefaultTries
	}
	if s.Tries < 1 || s.Tries > MaxTries {
		return s, fmt.Errorf("tries %d: want 1 to %d", s.Tries, MaxTries)
	}
	return s, nil
}

// kernel and initrd are the ESP paths of the spec's kernel and initrd.
func (s StageSpec) kernel() string { return ContentDir(s.KernelSHA256) + "/" + KernelName }
func (s StageSpec) initrd() string { return ContentDir(s.InitrdSHA256) + "/" + InitrdName }

// entry renders the BLS type #1 entry of a normalized spec.
func (s StageSpec) entry() string {
	args := append(append([]string(nil), s.KernelArgs...), fmt.Sprintf("%s=%d", RevisionArg, s.Revision))
	var b strings.Builder
	fmt.Fprintf(&b, "title %s\n", s.Title)
	fmt.Fprintf(&b, "version %d\n", s.Revision)
	fmt.Fprintf(&b, "sort-key roost\n")
	fmt.Fprintf(&b, "linux %s\n", s.kernel())
	fmt.Fprintf(&b, "initrd %s\n", s.initrd())
	fmt.Fprintf(&b, "initrd %s/%s\n", RevisionDir(s.Revision), ConfigInitrdName)
	for _, x := range s.Extensions {
		fmt.Fprintf(&b, "initrd %s\n", x.initrd())
	}
	fmt.Fprintf(&b, "options %s\n", strings.Join(args, " "))
	return b.String()
}

// sameContent reports whether every one of a revision's entries reads
// entry and its config initrd holds config.
func (e ESP) sameContent(old []Entry, entry string, config []byte) bool {
	for _, en := range old {
		got, err := os.ReadFile(e.entryPath(en.Name))
		if err != nil || string(got) != entry {
			return false
		}
	}
	got, err := os.ReadFile(e.path(RevisionDir(old[0].Revision) + "/" + ConfigInitrdName))
	return err == nil && bytes.Equal(got, config)
}

// stageFiles writes everything an entry references: kernel, initrd,
// extension initrds and config initrd.
func (e ESP) stageFiles(s StageSpec, config []byte) error {
	if err := e.copyContent(s.KernelPath, s.kernel(), s.KernelSHA256); err != nil {
		return fmt.Errorf("kernel: %w", err)
	}
	if err := e.copyContent(s.InitrdPath, s.initrd(), s.InitrdSHA256); err != nil {
		return fmt.Errorf("initrd: %w", err)
	}
	for _, x := range s.Extensions {
		if err := e.stageExtension(x); err != nil {
			return err
		}
	}
	cfg := RevisionDir(s.Revision) + "/" + ConfigInitrdName
	if got, err := os.ReadFile(e.path(cfg)); err == nil && bytes.Equal(got, config) {
		return nil
	}
	if err := mkdirs(e.path(RevisionDir(s.Revision))); err != nil {
		return err
	}
	if err := writeAtomic(e.path(cfg), bytes.NewReader(config), 0o600, nil); err != nil {
		return fmt.Errorf("config initrd: %w", err)
	}
	return nil
}

// copyContent copies the local file src to the content-addressed ESP path
// dst unless a file of src's size is there, and checks the copy's sha256.
func (e ESP) copyContent(src, dst, sha string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	fi, err := in.Stat()
	if err != nil {
		return err
	}
	if have, err := os.Stat(e.path(dst)); err == nil && have.Mode().IsRegular() && have.Size() == fi.Size() {
		return nil
	}
	if err := mkdirs(e.path(dst[:strings.LastIndex(dst, "/")])); err != nil {
		return err
	}
	h := sha256.New()
	return writeAtomic(e.path(dst), io.TeeReader(in, h), 0o600, func(n int64) error {
		return checkDigest(src, h, sha, n, fi.Size())
	})
}

func checkDigest(src string, h hash.Hash, want string, n, size int64) error {
	if n != size {
		return fmt.Errorf("%s: copied %d bytes of %d", src, n, size)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != want {
		return fmt.Errorf("%s: sha256 is %s, want %s", src, got, want)
	}
	return nil
}

// ConfigPadding is how many zero bytes the config initrd starts with when
// it follows an image initrd of initrdSize bytes: the next cpio header must
// start at an offset divisible by 4 (the kernel's initramfs unpacker skips
// zeros, and finds "070701" only at such offsets).
func ConfigPadding(initrdSize int64) int { return int((4 - initrdSize%4) % 4) }
