// Package imagebuilder bakes enrollment images: it gathers a release (a
// bundle from package release, or a kernel and initrd), renders the
// Ignition config (package ignition: agent config, agent unit, SSH keys,
// enrollment network profile, user snippets) and writes a hybrid ISO or a
// raw GPT disk image (package iso). Inspect reads an image back.
package imagebuilder
