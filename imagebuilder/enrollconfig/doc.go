// Package enrollconfig makes the enrollment config of a freshly booted
// server: the roost-agent configuration (hub addresses, hub CA, enrollment
// token, release keys) wrapped in an Ignition config, and the "config
// initrd" that carries it (an uncompressed newc cpio archive the kernel
// unpacks after the release initrd, with the system extensions the live OS
// merges, such as the roost-agent extension). roost-image bakes it into
// enrollment ISOs and raw images (imagebuilder/iso); the hub serves it to
// servers that boot from the network (hub/netboot). One implementation,
// so both boot paths hand the agent the same configuration.
package enrollconfig
