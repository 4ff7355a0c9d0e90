// Package release builds and verifies ImageRelease bundles: a directory
// holding the kernel, the initrd (the whole OS, run from RAM), the
// systemd-boot EFI binary and release.json — the version, component
// versions and the sha256 of every artifact — signed with ed25519
// (release.json.sig).
//
// A bundle is made from a definition (images/NAME.yaml) that names where
// each artifact comes from: a local file, or a URL with its sha256 (fetched
// only when asked, where internet exists).
package release

import (
	"crypto/ed25519"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/roostfleet/roost/internal/atomicfile"
	"sigs.k8s.io/yaml"
)

// File names inside a bundle.
const (
	ManifestFile   = "release.json"
	SignatureFile  = "release.json.sig"
	KernelFile     = "vmlinuz"
	InitrdFile     = "initrd.img"
	BootFile       = "systemd-bootx64.efi"
	APIVersion     = "roost.io/v1"
	DefinitionKind = "ImageDefinition"
	ReleaseKind    = "ImageRelease"
)

// DefaultSystemdBoot is where Debian's systemd-boot-efi installs the EFI binary.
const DefaultSystemdBoot = "/usr/lib/systemd/boot/efi/systemd-bootx64.efi"

var sha256RE = regexp.MustCompile(`^[0-9a-fA-F]{64}$`)

// Source says where one artifact comes from.
type Source struct {
	// Path is a local file (relative to the definition's directory).
	Path string `json:"path,omitempty"`
	// URL is fetched (with --fetch) into Path, or into the output directory.
	URL string `json:"url,omitempty"`
	// SHA256 pins the content (required with URL).
	SHA256 string `json:"sha256,omitempty"`
	// cpio.gz initrd is used as is: leave empty).
	Package string `json:"package,omitempty"` // Debian package that ships Path, for error messages
}

// Definition is images/NAME.yaml.
type Definition struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Name       string `json:"name"`
	Version    string `json:"version"`
	Channel    string `json:"channel,omitempty"`
	// UpgradesFrom lists the versions a Server may move to this release
	// from; empty means any (the hub routes other jumps through an
	// intermediate release).
	UpgradesFrom []string          `json:"upgradesFrom,omitempty"`
	Date         time.Time         `json:"date"`
	Description  string            `json:"description,omitempty"`
	Cmdline      []string          `json:"cmdline,omitempty"`
	Components   map[string]string `json:"components,omitempty"`
	Kernel       Source            `json:"kernel"`
	Initrd       Source            `json:"initrd"`
	Bootloader   Source            `json:"bootloader"`
}

// Artifact is one file of a bundle.
type Artifact struct {
	Name   string `json:"name"`
	File   string `json:"file"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

// Manifest is release.json.
type Manifest struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Name       string `json:"name"`
	Version    string `json:"version"`
	Channel    string `json:"channel,omitempty"`
	// UpgradesFrom is the definition's, signed with the rest.
	UpgradesFrom []string          `json:"upgradesFrom,omitempty"`
	Date         time.Time         `json:"date"`
	Cmdline      []string          `json:"cmdline,omitempty"`
	Components   map[string]string `json:"components,omitempty"`
	Artifacts    []Artifact        `json:"artifacts"`
	// KeyID is the hex sha256 (first 8 bytes) of the signing public key.
	KeyID string `json:"keyID,omitempty"`
}

// Artifact returns the named artifact.
func (m *Manifest) Artifact(name string) (Artifact, bool) {
	for _, a := range m.Artifacts {
		if a.Name == name {
			return a, true
		}
	}
	return Artifact{}, false
}

// LoadDefinition reads and checks a definition file. Relative paths are
// made relative to its directory.
func LoadDefinition(p string) (*Definition, error) {
	data, err := os.ReadFile(p)
	if err != nil {
		return nil, fmt.Errorf("image definition: %w", err)
	}
	var d Definition
	if err := yaml.UnmarshalStrict(data, &d); err != nil {
		var perr *time.ParseError
		if errors.As(err, &perr) || strings.Contains(err.Error(), "Time.UnmarshalJSON") {
			return nil, fmt.Errorf("image definition %s: date: %s: want an RFC 3339 date and time such as 2026-11-01T00:00:00Z "+
				"(a date alone is not enough)", p, dateValue(data, perr))
		}
		return nil, fmt.Errorf("image definition %s: %w", p, err)
	}
	if d.APIVersion != APIVersion || d.Kind != DefinitionKind {
		return nil, fmt.Errorf("image definition %s: want apiVersion %s, kind %s", p, APIVersion, DefinitionKind)
	}
	if d.Name == "" || d.Version == "" {
		return nil, fmt.Errorf("image definition %s: name and version are required", p)
	}
	if d.Date.IsZero() {
		return nil, fmt.Errorf("image definition %s: date is required (it fixes every timestamp in the images)", p)
	}
	base := filepath.Dir(p)
	for field, s := range map[string]*Source{"kernel": &d.Kernel, "initrd": &d.Initrd, "bootloader": &d.Bootloader} {
		if s.Path == "" && s.URL == "" {
			if field == "bootloader" {
				s.Path = DefaultSystemdBoot
				s.Package = "systemd-boot-efi"
				continue
			}
			return nil, fmt.Errorf("image definition %s: %s: give path or url", p, field)
		}
		if s.URL != "" && s.SHA256 == "" {
			return nil, fmt.Errorf("image definition %s: %s.sha256 is required with url", p, field)
		}
		if s.SHA256 != "" && !sha256RE.MatchString(s.SHA256) {
			return nil, fmt.Errorf("image definition %s: %s.sha256 %q: want 64 hex digits (fill it from the release's digests)", p, field, s.SHA256)
		}
		if strings.Contains(s.URL, "FLATCAR_VERSION") || strings.Contains(d.Version, "FLATCAR_VERSION") {
			return nil, fmt.Errorf("image definition %s: a template: set the Flatcar version (see the comments in the file)", p)
		}
		if s.Path != "" && !filepath.IsAbs(s.Path) {
			s.Path = filepath.Join(base, s.Path)
		}
	}
	if err := ValidateVersion(d.Version); err != nil {
		return nil, fmt.Errorf("image definition %s: version %w", p, err)
	}
	for i, v := range d.UpgradesFrom {
		if err := ValidateVersion(v); err != nil {
			return nil, fmt.Errorf("image definition %s: upgradesFrom[%d]: version %w", p, i, err)
		}
		if v == d.Version {
			return nil, fmt.Errorf("image definition %s: upgradesFrom[%d]: %s is the release's own version", p, i, v)
		}
	}
	return &d, nil
}

// dateValue describes the date a definition gave, for an error: the value
// the parse error quotes, else "invalid value".
func dateValue(data []byte, perr *time.ParseError) string {
	if perr != nil {
		return fmt.Sprintf("%q is not a valid time", perr.Value)
	}
	var raw struct {
		Date any `json:"date"`
	}
	if yaml.Unmarshal(data, &raw) == nil && raw.Date != nil {
		return fmt.Sprintf("%v is not a valid time", raw.Date)
	}
	return "not a valid time"
}

// Options tune Build.
type Options struct {
	// Fetch allows downloading URL sources.
	Fetch bool
	// Key signs the manifest; nil leaves it unsigned.
	Key ed25519.PrivateKey
	// Progress is told about each artifact copied.
	Progress func(step string, done, total int64)
}

// Build makes the bundle of d in dir (created if missing). It writes each
// file through a temporary name, so a failed build leaves no partial file.
func Build(d *Definition, dir string, o Options) (*Manifest, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	m := &Manifest{APIVersion: APIVersion, Kind: ReleaseKind, Name: d.Name, Version: d.Version, Channel: d.Channel, UpgradesFrom: d.UpgradesFrom, Date: d.Date.UTC(), Cmdline: d.Cmdline, Components: d.Components}
	for _, a := range []struct {
		name, file string
		src        Source
	}{{"kernel", KernelFile, d.Kernel}, {"initrd", InitrdFile, d.Initrd}, {"bootloader", BootFile, d.Bootloader}} {
		art, err := place(a.name, a.src, filepath.Join(dir, a.file), o)
		if err != nil {
			return nil, err
		}
		art.File = a.file
		m.Artifacts = append(m.Artifacts, art)
	}
	sort.Slice(m.Artifacts, func(i, j int) bool { return m.Artifacts[i].Name < m.Artifacts[j].Name })
	if o.Key != nil {
		m.KeyID = KeyID(o.Key.Public().(ed25519.PublicKey))
	}
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, err
	}
	data = append(data, '\n')
	if err := atomicfile.WriteFile(filepath.Join(dir, ManifestFile), data, 0o644); err != nil {
		return nil, err
	}
	sigPath := filepath.Join(dir, SignatureFile)
	if o.Key != nil {
		sig := base64.StdEncoding.EncodeToString(ed25519.Sign(o.Key, data)) + "\n"
		if err := atomicfile.WriteFile(sigPath, []byte(sig), 0o644); err != nil {
			return nil, err
		}
	} else {
		_ = os.Remove(sigPath)
	}
	return m, nil
}

func place(name string, s Source, dst string, o Options) (Artifact, error) {
	src := s.Path
	if s.URL != "" && (src == "" || !exists(src)) {
		if !o.Fetch {
			where := src
			if where == "" {
				where = "a local path"
			}
			return Artifact{}, fmt.Errorf("%s: %s is not fetched (pass --fetch where internet exists, or download it to %s)", name, s.URL, where)
		}
		tmp := dst + ".download"
		if err := fetch(s.URL, tmp); err != nil {
			os.Remove(tmp)
			return Artifact{}, fmt.Errorf("%s: %w", name, err)
		}
		src = tmp
		defer os.Remove(tmp)
	}
	if _, err := os.Stat(src); err != nil {
		if s.Package != "" {
			return Artifact{}, fmt.Errorf("%s: %w (install the Debian package %s)", name, err, s.Package)
		}
		return Artifact{}, fmt.Errorf("%s: %w", name, err)
	}
	tmp := dst + ".tmp"
	sum, size, err := copySum(src, tmp)
	if err != nil {
		os.Remove(tmp)
		return Artifact{}, fmt.Errorf("%s: %w", name, err)
	}
	if s.SHA256 != "" && !strings.EqualFold(s.SHA256, sum) {
		os.Remove(tmp)
		return Artifact{}, fmt.Errorf("%s: sha256 %s, want %s", name, sum, s.SHA256)
	}
	if err := os.Rename(tmp, dst); err != nil {
		os.Remove(tmp)
		return Artifact{}, err
	}
	if o.Progress != nil {
		o.Progress("copy "+name, size, size)
	}
	return Artifact{Name: name, Size: size, SHA256: sum}, nil
}

func exists(p string) bool { _, err := os.Stat(p); return err == nil }

func fetch(url, dst string) error {
	resp, err := http.Get(url) //nolint:gosec // URL comes from the operator's definition
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	f, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func copySum(src, dst string) (string, int64, error) {
	in, err := os.Open(src)
	if err != nil {
		return "", 0, err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return "", 0, err
	}
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(out, h), in)
	if err != nil {
		out.Close()
		return "", 0, err
	}
	if err := out.Close(); err != nil {
		return "", 0, err
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
}

// Bundle is a release bundle read from a directory.
type Bundle struct {
	Dir      string
	Manifest Manifest
	Signed   bool
}

// Path returns the path of the named artifact.
func (b *Bundle) Path(name string) string {
	a, _ := b.Manifest.Artifact(name)
	return filepath.Join(b.Dir, a.File)
}

// Load reads a bundle and checks the sha256 of every artifact. With pub,
// the signature must verify; without, a present signature is not checked.
func Load(dir string, pub ed25519.PublicKey) (*Bundle, error) {
	data, err := os.ReadFile(filepath.Join(dir, ManifestFile))
	if err != nil {
		return nil, fmt.Errorf("release bundle: %w", err)
	}
	var m Manifest
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("release bundle %s: %w", dir, err)
	}
	if m.Kind != ReleaseKind {
		return nil, fmt.Errorf("release bundle %s: kind %q, want %s", dir, m.Kind, ReleaseKind)
	}
	b := &Bundle{Dir: dir, Manifest: m}
	sig, err := os.ReadFile(filepath.Join(dir, SignatureFile))
	if err == nil {
		b.Signed = true
	}
	if pub != nil {
		if !b.Signed {
			return nil, fmt.Errorf("release bundle %s: not signed", dir)
		}
		raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(string(sig)))
		if err != nil || !ed25519.Verify(pub, data, raw) {
			return nil, fmt.Errorf("release bundle %s: signature does not verify with key %s", dir, KeyID(pub))
		}
	}
	for _, a := range m.Artifacts {
		f, err := os.Open(filepath.Join(dir, a.File))
		if err != nil {
			return nil, fmt.Errorf("release bundle %s: %s: %w", dir, a.Name, err)
		}
		h := sha256.New()
		_, err = io.Copy(h, f)
		f.Close()
		if err != nil {
			return nil, err
		}
		if got := hex.EncodeToString(h.Sum(nil)); got != a.SHA256 {
			return nil, fmt.Errorf("release bundle %s: %s: sha256 %s, manifest says %s", dir, a.Name, got, a.SHA256)
		}
	}
	if _, ok := m.Artifact("kernel"); !ok {
		return nil, fmt.Errorf("release bundle %s: no kernel", dir)
	}
	if _, ok := m.Artifact("initrd"); !ok {
		return nil, fmt.Errorf("release bundle %s: no initrd", dir)
	}
	return b, nil
}

// KeyID is the short identifier of a public key.
func KeyID(pub ed25519.PublicKey) string {
	h := sha256.Sum256(pub)
	return hex.EncodeToString(h[:8])
}

// GenerateKey writes an ed25519 key pair: prefix.key (PKCS#8 PEM, 0600) and
// prefix.pub (PKIX PEM). It refuses to overwrite.
func GenerateKey(prefix string) (ed25519.PublicKey, error) {
	pub, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		return nil, err
	}
	for _, p := range []string{prefix + ".key", prefix + ".pub"} {
		if exists(p) {
			return nil, fmt.Errorf("%s exists: not overwriting a key", p)
		}
	}
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return nil, err
	}
	pubDER, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return nil, err
	}
	if err := atomicfile.WriteFile(prefix+".key", pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		return nil, err
	}
	if err := atomicfile.WriteFile(prefix+".pub", pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER}), 0o644); err != nil {
		return nil, err
	}
	return pub, nil
}

// LoadPrivateKey reads a key written by GenerateKey.
func LoadPrivateKey(p string) (ed25519.PrivateKey, error) {
	der, err := readPEM(p, "signing key")
	if err != nil {
		return nil, err
	}
	k, err := x509.ParsePKCS8PrivateKey(der)
	if err != nil {
		return nil, fmt.Errorf("signing key %s: %w", p, err)
	}
	priv, ok := k.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("signing key %s: not an ed25519 key", p)
	}
	return priv, nil
}

// LoadPublicKey reads a public key written by GenerateKey.
func LoadPublicKey(p string) (ed25519.PublicKey, error) {
	der, err := readPEM(p, "public key")
	if err != nil {
		return nil, err
	}
	k, err := x509.ParsePKIXPublicKey(der)
	if err != nil {
		return nil, fmt.Errorf("public key %s: %w", p, err)
	}
	pub, ok := k.(ed25519.PublicKey)
	if !ok {
		return nil, fmt.Errorf("public key %s: not an ed25519 key", p)
	}
	return pub, nil
}

// readPEM returns the DER bytes of the first PEM block in file p; what names
// the file in errors ("signing key", "public key").
func readPEM(p, what string) ([]byte, error) {
	data, err := os.ReadFile(p)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	blk, _ := pem.Decode(data)
	if blk == nil {
		return nil, fmt.Errorf("%s %s: no PEM block", what, p)
	}
	return blk.Bytes, nil
}
