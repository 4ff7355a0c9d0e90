package feed

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"

	"github.com/roostfleet/roost/imagebuilder/release"
	"github.com/roostfleet/roost/internal/atomicfile"
)

// Published says what Publish did with one bundle or extension.
type Published struct {
	Version, Channel string
	// Extension is the extension's name when this is an extension version
	// (Version is then its version).
	Extension string
	// Added is false when the channel listed the release already (the same
	// manifest): nothing changed.
	Added bool
	// Blobs counts the artifacts copied (those already in the feed are
	// not).
	Blobs int
}

// Extension is a signed extension image to publish: its .raw file and
// its manifest and signature verbatim, as imagebuilder/sysext.LoadBundle
// read them (which checked the image against the manifest), and what the
// manifest says.
type Extension struct {
	Raw           string
	Name, Version string
	// SHA256 (lower-case hex) and Size (bytes) are the image's.
	SHA256    string
	Size      int64
	Manifest  []byte
	Signature string
}

// Publish adds the signed release bundles in bundles, and the signed
// extension images exts, to the feed rooted at dir (created if missing).
// A release goes on channel when not empty, else on its manifest's
// channel; the extensions go on channel, else on every channel of the
// bundles given (none: an error that asks for one). Every bundle is loaded
// and its artifacts' sha256 checked first (release.Load); an unsigned
// bundle or extension, a bundle without a channel, or a version the feed
// holds with another manifest is refused before anything is written.
// Artifacts and extension images are copied under blobs/ (skipped when
// present, the copy's sha256 checked), manifests and signatures verbatim,
// then the channel indexes, then index.json, each replaced atomically.
// Publishing the same again changes nothing.
func Publish(dir, channel string, bundles []string, exts ...Extension) ([]Published, error) {
	type item struct {
		b        *release.Bundle
		manifest []byte
		sig      []byte
		channel  string
	}
	var items []item
	for _, bd := range bundles {
		b, err := release.Load(bd, nil)
		if err != nil {
			return nil, err
		}
		if !b.Signed {
			return nil, fmt.Errorf("release bundle %s is not signed: make it with roost-image release --key KEY (a hub imports only signed releases)", bd)
		}
		it := item{b: b, channel: channel}
		if it.channel == "" {
			it.channel = b.Manifest.Channel
		}
		if it.channel == "" {
			return nil, fmt.Errorf("release bundle %s names no channel: pass --channel", bd)
		}
		if !channelRE.MatchString(it.channel) {
			return nil, fmt.Errorf("channel %q is not a DNS label (e.g. beta)", it.channel)
		}
		if it.manifest, err = os.ReadFile(filepath.Join(bd, release.ManifestFile)); err != nil {
			return nil, err
		}
		if it.sig, err = os.ReadFile(filepath.Join(bd, release.SignatureFile)); err != nil {
			return nil, err
		}
		old, err := os.ReadFile(filepath.Join(dir, ReleaseDir(b.Manifest.Version), release.ManifestFile))
		switch {
		case err == nil && !bytes.Equal(old, it.manifest):
			return nil, fmt.Errorf("the feed holds release %s with another manifest: releases are immutable; make a new version", b.Manifest.Version)
		case err != nil && !errors.Is(err, fs.ErrNotExist):
			return nil, err
		}
		items = append(items, it)
	}
	extChannels := []string{channel}
	if channel == "" {
		extChannels = nil
		for _, it := range items {
			if !slices.Contains(extChannels, it.channel) {
				extChannels = append(extChannels, it.channel)
			}
		}
	}
	for _, x := range exts {
		if len(extChannels) == 0 {
			return nil, fmt.Errorf("extension %s: pass --channel (or a release bundle, whose channel it joins)", x.Raw)
		}
		if x.Signature == "" {
			return nil, fmt.Errorf("extension %s is not signed: make it with roost-image sysext --key KEY (a hub imports only signed extensions)", x.Raw)
		}
		if !extensionPartRE.MatchString(x.Name) || !extensionPartRE.MatchString(x.Version) {
			return nil, fmt.Errorf("extension %s: name %q version %q: want letters, digits and . _ + ~ -", x.Raw, x.Name, x.Version)
		}
		old, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(ExtensionDir(x.Name, x.Version)), ExtensionManifestFile))
		switch {
		case err == nil && !bytes.Equal(old, x.Manifest):
			return nil, fmt.Errorf("the feed holds extension %s %s with another manifest: extensions are immutable; make a new version", x.Name, x.Version)
		case err != nil && !errors.Is(err, fs.ErrNotExist):
			return nil, err
		}
	}
	ix, err := readIndex(dir)
	if err != nil {
		return nil, err
	}
	channels := map[string]*ChannelIndex{}
	channelIndex := func(ch string) (*ChannelIndex, error) {
		if ci := channels[ch]; ci != nil {
			return ci, nil
		}
		ci, err := readChannel(dir, ch)
		if err != nil {
			return nil, err
		}
		channels[ch] = ci
		if !slices.Contains(ix.Channels, ch) {
			ix.Channels = append(ix.Channels, ch)
		}
		return ci, nil
	}
	var out []Published
	for _, it := range items {
		p := Published{Version: it.b.Manifest.Version, Channel: it.channel}
		for _, a := range it.b.Manifest.Artifacts {
			copied, err := copyBlob(filepath.Join(it.b.Dir, a.File), filepath.Join(dir, filepath.FromSlash(BlobPath(a.SHA256))), a.SHA256)
			if err != nil {
				return nil, err
			}
			if copied {
				p.Blobs++
			}
		}
		rd := filepath.Join(dir, filepath.FromSlash(ReleaseDir(p.Version)))
		if err := os.MkdirAll(rd, 0o755); err != nil {
			return nil, err
		}
		if err := atomicfile.WriteFile(filepath.Join(rd, release.SignatureFile), it.sig, 0o644); err != nil {
			return nil, err
		}
		if err := atomicfile.WriteFile(filepath.Join(rd, release.ManifestFile), it.manifest, 0o644); err != nil {
			return nil, err
		}
		ci, err := channelIndex(it.channel)
		if err != nil {
			return nil, err
		}
		if !slices.ContainsFunc(ci.Releases, func(e Entry) bool { return e.Version == p.Version }) {
			ci.Releases = append(ci.Releases, Entry{Version: p.Version,
				Manifest: ReleaseDir(p.Version) + "/" + release.ManifestFile, Signature: ReleaseDir(p.Version) + "/" + release.SignatureFile})
			p.Added = true
		}
		out = append(out, p)
	}
	for _, x := range exts {
		copied, err := copyBlob(x.Raw, filepath.Join(dir, filepath.FromSlash(BlobPath(x.SHA256))), x.SHA256)
		if err != nil {
			return nil, err
		}
		xd := ExtensionDir(x.Name, x.Version)
		if err := os.MkdirAll(filepath.Join(dir, filepath.FromSlash(xd)), 0o755); err != nil {
			return nil, err
		}
		if err := atomicfile.WriteFile(filepath.Join(dir, filepath.FromSlash(xd), ExtensionSignatureFile), []byte(x.Signature+"\n"), 0o644); err != nil {
			return nil, err
		}
		if err := atomicfile.WriteFile(filepath.Join(dir, filepath.FromSlash(xd), ExtensionManifestFile), x.Manifest, 0o644); err != nil {
			return nil, err
		}
		for i, ch := range extChannels {
			ci, err := channelIndex(ch)
			if err != nil {
				return nil, err
			}
			p := Published{Extension: x.Name, Version: x.Version, Channel: ch}
			if i == 0 && copied {
				p.Blobs = 1
			}
			if !slices.ContainsFunc(ci.Extensions, func(e ExtensionEntry) bool { return e.Name == x.Name && e.Version == x.Version }) {
				ci.Extensions = append(ci.Extensions, ExtensionEntry{Name: x.Name, Version: x.Version,
					Manifest: xd + "/" + ExtensionManifestFile, Signature: xd + "/" + ExtensionSignatureFile})
				p.Added = true
			}
			out = append(out, p)
		}
	}
	if err := os.MkdirAll(filepath.Join(dir, "channels"), 0o755); err != nil {
		return nil, err
	}
	for _, ch := range slices.Sorted(maps.Keys(channels)) {
		if err := writeJSON(filepath.Join(dir, filepath.FromSlash(ChannelPath(ch))), channels[ch]); err != nil {
			return nil, err
		}
	}
	slices.Sort(ix.Channels)
	return out, writeJSON(filepath.Join(dir, IndexFile), ix)
}

// readIndex reads dir's index.json, or an empty index when there is none.
func readIndex(dir string) (*Index, error) {
	data, err := os.ReadFile(filepath.Join(dir, IndexFile))
	if errors.Is(err, fs.ErrNotExist) {
		return &Index{APIVersion: release.APIVersion, Kind: IndexKind}, nil
	}
	if err != nil {
		return nil, err
	}
	return ParseIndex(data)
}

// readChannel reads channel's index under dir, or an empty one.
func readChannel(dir, channel string) (*ChannelIndex, error) {
	data, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(ChannelPath(channel))))
	if errors.Is(err, fs.ErrNotExist) {
		return &ChannelIndex{APIVersion: release.APIVersion, Kind: ChannelKind, Channel: channel}, nil
	}
	if err != nil {
		return nil, err
	}
	return ParseChannel(channel, data)
}

func writeJSON(p string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(p, append(data, '\n'), 0o644)
}

// copyBlob copies src to dst unless dst exists with content digest; it
// checks the copy's sha256 and renames it into place. It says whether it
// copied.
func copyBlob(src, dst, digest string) (bool, error) {
	if f, err := os.Open(dst); err == nil {
		h := sha256.New()
		_, err := io.Copy(h, f)
		f.Close()
		if err == nil && hex.EncodeToString(h.Sum(nil)) == digest {
			return false, nil
		}
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return false, err
	}
	in, err := os.Open(src)
	if err != nil {
		return false, err
	}
	defer in.Close()
	tmp := dst + ".tmp"
	out, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return false, err
	}
	h := sha256.New()
	_, err = io.Copy(io.MultiWriter(out, h), in)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err == nil && hex.EncodeToString(h.Sum(nil)) != digest {
		err = fmt.Errorf("%s: sha256 %s, the manifest says %s", src, hex.EncodeToString(h.Sum(nil)), digest)
	}
	if err != nil {
		os.Remove(tmp)
		return false, err
	}
	return true, os.Rename(tmp, dst)
}
