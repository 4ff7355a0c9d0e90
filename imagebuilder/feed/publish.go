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

// Published says what Publish did with one bundle.
type Published struct {
	Version, Channel string
	// Added is false when the channel listed the release already (the same
	// manifest): nothing changed.
	Added bool
	// Blobs counts the artifacts copied (those already in the feed are
	// not).
	Blobs int
}

// Publish adds the signed release bundles in bundles to the feed rooted
// at dir (created if missing) on channel: channel when not empty, else
// each bundle's manifest channel. Every bundle is loaded and its artifacts'
// sha256 checked first (release.Load); an unsigned bundle, a bundle
// without a channel, or a version the feed holds with another manifest is
// refused before anything is written. Artifacts are copied under blobs/
// (skipped when present), the manifest and signature verbatim, then the
// channel indexes, then index.json, each replaced atomically. Publishing a
// bundle again changes nothing.
func Publish(dir, channel string, bundles []string) ([]Published, error) {
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
	ix, err := readIndex(dir)
	if err != nil {
		return nil, err
	}
	channels := map[string]*ChannelIndex{}
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
		ci := channels[it.channel]
		if ci == nil {
			if ci, err = readChannel(dir, it.channel); err != nil {
				return nil, err
			}
			channels[it.channel] = ci
		}
		if !slices.ContainsFunc(ci.Releases, func(e Entry) bool { return e.Version == p.Version }) {
			ci.Releases = append(ci.Releases, Entry{Version: p.Version,
				Manifest: ReleaseDir(p.Version) + "/" + release.ManifestFile, Signature: ReleaseDir(p.Version) + "/" + release.SignatureFile})
			p.Added = true
		}
		if !slices.Contains(ix.Channels, it.channel) {
			ix.Channels = append(ix.Channels, it.channel)
		}
		out = append(out, p)
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
