package feed

import (
	"encoding/json"
	"fmt"
	"path"
	"regexp"
	"slices"

	"github.com/roostfleet/roost/imagebuilder/release"
)

// Kinds and names of the layout's files.
const (
	IndexKind   = "ReleaseFeedIndex"
	ChannelKind = "ReleaseFeedChannel"
	IndexFile   = "index.json"
)

// MaxIndexSize bounds index.json and a channel file, in bytes (a reader
// refuses larger ones); MaxManifestSize bounds a release manifest and its
// signature.
const (
	MaxIndexSize    = 4 << 20
	MaxManifestSize = 1 << 20
)

// Index is index.json: the feed's channels.
type Index struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	Channels   []string `json:"channels"`
}

// ChannelIndex is channels/CHANNEL.json: the releases of one channel,
// oldest first, and the extension versions (systemd-sysext images such as
// kubelet) published with them.
type ChannelIndex struct {
	APIVersion string           `json:"apiVersion"`
	Kind       string           `json:"kind"`
	Channel    string           `json:"channel"`
	Releases   []Entry          `json:"releases"`
	Extensions []ExtensionEntry `json:"extensions,omitempty"`
}

// ExtensionEntry is one extension version of a channel: its name and
// version, and where its signed manifest (NAME-VERSION.raw.manifest.json,
// verbatim) and signature are. Its image is a blob like any artifact.
type ExtensionEntry struct {
	Name      string `json:"name"`
	Version   string `json:"version"`
	Manifest  string `json:"manifest"`
	Signature string `json:"signature"`
}

// Entry is one release of a channel: its version and where its manifest
// and signature are (paths relative to the root).
type Entry struct {
	Version   string `json:"version"`
	Manifest  string `json:"manifest"`
	Signature string `json:"signature"`
}

// ChannelPath is the path of channel's index.
func ChannelPath(channel string) string { return "channels/" + channel + ".json" }

// ReleaseDir is the directory of a release's manifest and signature.
func ReleaseDir(version string) string { return "releases/" + version }

// ExtensionDir is the directory of an extension version's manifest and
// signature.
func ExtensionDir(name, version string) string { return "extensions/" + name + "/" + version }

// Names of an extension's manifest and signature in its ExtensionDir.
const (
	ExtensionManifestFile  = "extension.json"
	ExtensionSignatureFile = "extension.json.sig"
)

// BlobPath is the path of the artifact with sha256 digest.
func BlobPath(digest string) string { return "blobs/sha256/" + digest }

var channelRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`)

// ParseIndex decodes index.json and checks its kind and channel names.
func ParseIndex(data []byte) (*Index, error) {
	var ix Index
	if err := json.Unmarshal(data, &ix); err != nil {
		return nil, fmt.Errorf("%s: %w", IndexFile, err)
	}
	if ix.Kind != IndexKind {
		return nil, fmt.Errorf("%s: kind %q, want %s (is this a release feed written by roost-image publish?)", IndexFile, ix.Kind, IndexKind)
	}
	for _, ch := range ix.Channels {
		if !channelRE.MatchString(ch) {
			return nil, fmt.Errorf("%s: channel %q is not a DNS label", IndexFile, ch)
		}
	}
	return &ix, nil
}

// ParseChannel decodes channel's index and checks its kind, channel and
// entries (versions valid and listed once, paths relative and clean).
func ParseChannel(channel string, data []byte) (*ChannelIndex, error) {
	var ci ChannelIndex
	name := ChannelPath(channel)
	if err := json.Unmarshal(data, &ci); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if ci.Kind != ChannelKind || ci.Channel != channel {
		return nil, fmt.Errorf("%s: kind %q channel %q, want %s %q", name, ci.Kind, ci.Channel, ChannelKind, channel)
	}
	var seen []string
	for i, e := range ci.Releases {
		if err := release.ValidateVersion(e.Version); err != nil {
			return nil, fmt.Errorf("%s: releases[%d]: version %w", name, i, err)
		}
		if slices.Contains(seen, e.Version) {
			return nil, fmt.Errorf("%s: releases[%d]: version %s is listed twice", name, i, e.Version)
		}
		seen = append(seen, e.Version)
		for _, p := range []string{e.Manifest, e.Signature} {
			if !relativePath(p) {
				return nil, fmt.Errorf("%s: releases[%d]: path %q is not a clean relative path inside the feed", name, i, p)
			}
		}
	}
	type nv struct{ name, version string }
	var seenExt []nv
	for i, e := range ci.Extensions {
		if !extensionPartRE.MatchString(e.Name) || !extensionPartRE.MatchString(e.Version) {
			return nil, fmt.Errorf("%s: extensions[%d]: name %q version %q: want letters, digits and . _ + ~ - (kubelet v1.34.4)", name, i, e.Name, e.Version)
		}
		if slices.Contains(seenExt, nv{e.Name, e.Version}) {
			return nil, fmt.Errorf("%s: extensions[%d]: %s %s is listed twice", name, i, e.Name, e.Version)
		}
		seenExt = append(seenExt, nv{e.Name, e.Version})
		for _, p := range []string{e.Manifest, e.Signature} {
			if !relativePath(p) {
				return nil, fmt.Errorf("%s: extensions[%d]: path %q is not a clean relative path inside the feed", name, i, p)
			}
		}
	}
	return &ci, nil
}

// extensionPartRE is what an extension name or version may be (the
// manifest's own checks, resource.Validate, come on import).
var extensionPartRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._+~-]{0,63}$`)

// relativePath says whether p is a clean relative path that stays inside
// the root.
func relativePath(p string) bool {
	return p != "" && !path.IsAbs(p) && path.Clean(p) == p && p != ".." && !hasDotDot(p)
}

func hasDotDot(p string) bool {
	for len(p) > 0 {
		i := 0
		for i < len(p) && p[i] != '/' {
			i++
		}
		if p[:i] == ".." {
			return true
		}
		if i == len(p) {
			break
		}
		p = p[i+1:]
	}
	return false
}
