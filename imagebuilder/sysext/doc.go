// Package sysext builds, inspects and validates systemd-sysext images —
// Roost's Extensions — and signs and verifies their manifests.
//
// An extension is a squashfs image that systemd-sysext merges over /usr
// and /opt at boot: the kubelet, roost-agent, site tools. It must hold
// usr/lib/extension-release.d/extension-release.NAME, an os-release style
// file whose ID (and SYSEXT_LEVEL or VERSION_ID) and ARCHITECTURE say
// which hosts may merge it. Roost also writes SYSEXT_ID=NAME and
// SYSEXT_VERSION_ID=VERSION, and names each image NAME-VERSION.raw.
//
// Build stages the given files in a temporary tree with normalised modes
// and runs mksquashfs (Debian package squashfs-tools) with flags that fix
// every timestamp, owner and the order of entries, so the same inputs give
// the same bytes on any machine with the same mksquashfs. Inspect reads an
// image back with go-diskfs, without mounting it or being root. Validate
// refuses what systemd-sysext would ignore or refuse, or what would break
// the host (a second os-release); CheckSet refuses extensions that cannot
// be merged together. A Manifest (NAME-VERSION.raw.manifest.json, signed
// with the release keys of roost-image keygen into .manifest.json.sig)
// pins the image by size and sha256 for the hub and the agent.
package sysext
