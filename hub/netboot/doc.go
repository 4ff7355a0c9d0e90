// Package netboot serves network boot to servers that have never booted:
// an iPXE script, the enrollment kernel and initrd of an ImageRelease, and
// the config initrd (imagebuilder/enrollconfig) with an enrollment token,
// over plain HTTP on roost-hub --boot-addr, the three pieces an enrollment
// ISO carries. A boot URL carries a grant (grant.go): the enrollment token
// it is for, the release it boots and its expiry under an HMAC of the hub
// CA key, so the URL is the only secret and it expires with the token. The
// token's secret is derived from its name with the CA key (secret.go), so
// the hub stores nothing but the token's hash and the boot endpoints only
// read the state: nothing unauthenticated writes. The script's kernel,
// initrd and config URLs carry short-lived download tokens of hub/media
// (handler.go, script.go).
package netboot
