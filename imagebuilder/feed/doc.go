// Package feed is the layout of a release feed: a static tree of signed
// release manifests and their artifacts, and of signed system extensions
// (kubelet, roost-agent), per channel, that any web server
// (or a directory on an air-gapped hub) can serve, and that a hub's
// ReleaseFeed polls. Publish writes it from release bundles (roost-image
// publish); the Index, ChannelIndex and Entry types read it.
//
// Layout under the feed's root (docs/release-feeds.md):
//
//	index.json                          {"kind": "ReleaseFeedIndex", "channels": ["beta", ...]}
//	channels/CHANNEL.json               {"kind": "ReleaseFeedChannel", "channel": "beta", "releases": [Entry...], "extensions": [ExtensionEntry...]}
//	releases/VERSION/release.json       the signed manifest, verbatim
//	releases/VERSION/release.json.sig   its signature
//	extensions/NAME/VERSION/extension.json      an extension's signed manifest (NAME-VERSION.raw.manifest.json), verbatim
//	extensions/NAME/VERSION/extension.json.sig  its signature
//	blobs/sha256/HEX                    every artifact and extension image, by the sha256 of its content
//
// Paths in the indexes are relative to the root. Releases are listed
// oldest first; a hub imports them in that order. Files are replaced
// atomically and index.json last, so a reader never sees a channel that
// names a release not written yet.
package feed
