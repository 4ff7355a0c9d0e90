#!/usr/bin/env bash
# Build the Roost testbed release bundle from Debian packages only:
#   Debian's kernel (linux-image-amd64) + an initrd that is a whole small
#   systemd root file system (debootstrap minbase + packages.txt), the kernel
#   modules of modules.txt (with dependencies), Debian's ignition run at boot
#   against the config the enrollment image appends, sshd (keys for "core"
#   from Ignition; host keys generated at boot), and what a worker needs
#   besides the kubelet, as on Flatcar: containerd, runc and the CNI
#   plugins, and systemd-sysext to merge extension images that arrive as
#   extra initrds in /etc/extensions.
# Like a stock Flatcar, the OS has nothing of Roost's: roost-agent comes as
# a system extension, roost-agent.raw (+ signed manifest) built here from
# $ROOST_BIN/roost-agent, which the enrollment image carries and the hub
# pins in every Revision.
# The OS runs from RAM. Results are cached by a hash of this recipe and its
# inputs under $ROOST_TESTBED_CACHE (default _output/testbed).
#
# Usage: images/testbed/build.sh            (make testbed runs it)
# Env:   ROOST_BIN (default bin/), ROOST_TESTBED_CACHE, DEBIAN_MIRROR, SUITE
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
bin=${ROOST_BIN:-$repo/bin}
cache=${ROOST_TESTBED_CACHE:-$repo/_output/testbed}
suite=${SUITE:-bookworm}
mirror=${DEBIAN_MIRROR:-$(sed -n 's/^URIs: *\(http[^ ]*\/debian\)$/\1/p' /etc/apt/sources.list.d/debian.sources 2>/dev/null | head -1)}
mirror=${mirror:-http://deb.debian.org/debian}
export DEBIAN_FRONTEND=noninteractive LC_ALL=C

log() { echo "testbed: $*" >&2; }

[ "$(id -u)" = 0 ] || { echo "testbed: needs root (debootstrap, chroot)" >&2; exit 1; }

# --- prerequisites (Debian packages) ---------------------------------------
"$here/../deps.sh" --e2e --bench
need=()
for p in debootstrap cpio zstd kmod systemd-boot-efi dpkg-dev; do
	dpkg -s "$p" >/dev/null 2>&1 || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
	log "installing ${need[*]}"
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

# --- inputs and cache keys -------------------------------------------------
kpkg=$(apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-[0-9]/ {print $2; exit}')
if [ -z "$kpkg" ]; then
	apt-get update -qq
	kpkg=$(apt-cache depends linux-image-amd64 | awk '/Depends: linux-image-[0-9]/ {print $2; exit}')
fi
kver=${kpkg#linux-image-}
kpkgver=$(apt-cache policy "$kpkg" | awk '/Candidate:/ {print $2}')
pkgs=$(grep -v '^#' "$here/packages.txt" | xargs)
pkgvers=$(for p in $pkgs; do printf '%s=%s\n' "$p" "$(apt-cache policy "$p" | awk '/Candidate:/ {print $2}')"; done)
# Bump base_recipe when the base steps below (debootstrap, kernel, modules,
# trim) change; the final key also covers this whole script.
base_recipe=3
debkey=$( { echo "base-recipe $base_recipe $suite $mirror"; echo "$pkgvers"; cat "$here/packages.txt"; } | sha256sum | cut -c1-16)
basekey=$( { echo "$debkey $kpkg $kpkgver"; cat "$here/modules.txt"; } | sha256sum | cut -c1-16)

overlaysum=$(cd "$here/overlay" && find . -type f | LC_ALL=C sort | xargs sha256sum | sha256sum | cut -c1-16)
scriptsum=$(sha256sum "$here/build.sh" | cut -c1-16)
key=$(echo "$basekey $overlaysum $scriptsum" | sha256sum | cut -c1-16)

deb=$cache/debootstrap-$debkey
base=$cache/base-$basekey
out=$cache/$key
mkdir -p "$cache"

if [ -f "$out/done" ]; then
	log "cached: $out"
else
	# --- base root file system (slow: cached on its own key) --------------------
	if [ ! -f "$base/done" ]; then
		# debootstrap: the slowest step, cached on the package set alone
		if [ ! -f "$deb/done" ]; then
			rm -rf "$deb"
			mkdir -p "$deb"
			log "debootstrap $suite (minbase + $pkgs) from $mirror"
			debootstrap --variant=minbase --include="$(echo "$pkgs" | tr ' ' ,)" "$suite" "$deb/rootfs" "$mirror" >"$deb/debootstrap.log" 2>&1 || {
				tail -30 "$deb/debootstrap.log" >&2; exit 1; }
			touch "$deb/done"
		fi
		# debootstrap can leave /proc (or /sys) of the target mounted, e.g.
		# when a package's maintainer script left a process behind
		findmnt -rno TARGET | awk -v p="$deb/rootfs/" 'index($0, p) == 1' | sort -r | while read -r m; do
			log "unmounting $m left by debootstrap"
			umount -l "$m"
		done
		rm -rf "$base"
		mkdir -p "$base"
		cp -a "$deb/rootfs" "$base/rootfs"

		log "kernel $kpkg ($kpkgver)"
		(cd "$base" && apt-get download -qq "$kpkg" 2>/dev/null)
		mkdir -p "$base/kernel"
		dpkg-deb -x "$base"/linux-image-*.deb "$base/kernel"
		cp "$base/kernel/boot/vmlinuz-$kver" "$base/vmlinuz"

		log "modules"
		kroot=$base/kernel
		depmod -b "$kroot" "$kver"
		mods=$(grep -v '^#' "$here/modules.txt" | xargs)
		mkdir -p "$base/rootfs/lib/modules/$kver"
		for m in $mods; do
			modprobe -d "$kroot" -S "$kver" --show-depends "$m" | awk '$1 == "insmod" {print $2}'
			[ "${PIPESTATUS[0]}" = 0 ] || { echo "testbed: module $m not found in $kpkg" >&2; exit 1; }
		done | awk '!seen[$0]++' > "$base/modules.order"
		while read -r ko; do
			rel=${ko#"$kroot"/}
			mkdir -p "$base/rootfs/$(dirname "$rel")"
			cp "$ko" "$base/rootfs/$rel"
		done < "$base/modules.order"
		cp "$kroot/lib/modules/$kver"/modules.{order,builtin,builtin.modinfo} "$base/rootfs/lib/modules/$kver/" 2>/dev/null || true
		depmod -b "$base/rootfs" "$kver"

		log "trim"
		chroot "$base/rootfs" apt-get clean
		rm -rf "$base/rootfs"/usr/share/{doc,man,info,locale,lintian} "$base/rootfs"/var/lib/apt/lists/* \
			"$base/rootfs"/var/cache/apt/* "$base/rootfs"/var/log/*.log "$base/rootfs"/usr/share/zoneinfo/right \
			"$base/rootfs"/var/cache/debconf/*-old "$base/rootfs"/var/lib/dpkg/*-old \
			"$base/rootfs"/usr/share/{bug,common-licenses,menu,doc-base}
		rm -f "$base"/linux-image-*.deb
		rm -rf "$base/kernel/lib"
		touch "$base/done"
	fi

	# --- final root file system: base + overlay ---------------------------------
	work=$(mktemp -d "$cache/.work-XXXXXX")
	trap 'rm -rf "$work"' EXIT
	log "assemble"
	cp -a "$base/rootfs" "$work/rootfs"
	r=$work/rootfs
	cp -a "$here/overlay/." "$r/"
	chown -R 0:0 "$r/etc/sudoers.d" && chmod 0440 "$r/etc/sudoers.d/core"
	# /init copies the root into a tmpfs and switch_roots to systemd there
	# (overlay usr/lib/roost/init): runc cannot pivot_root from rootfs
	ln -sf /usr/lib/roost/init "$r/init"
	mkdir -p "$r/sysroot"
	: > "$r/etc/machine-id"
	echo "testbed" > "$r/etc/hostname"
	printf '127.0.0.1 localhost\n127.0.1.1 testbed\n' > "$r/etc/hosts"
	mkdir -p "$r/usr/share/oem" "$r/etc/roost"
	chroot "$r" systemctl enable roost-ignition.service systemd-networkd.service >/dev/null 2>&1
	# System extensions (the kubelet, site tools) arrive as extra initrds in
	# /etc/extensions; systemd-sysext merges them before sysinit.target.
	chroot "$r" systemctl enable systemd-sysext.service >/dev/null 2>&1
	chroot "$r" systemctl is-enabled systemd-sysext.service >/dev/null || { echo "testbed: systemd-sysext.service not enabled" >&2; exit 1; }
	# containerd runs on workers only: their Revision enables it.
	chroot "$r" systemctl disable containerd.service >/dev/null 2>&1 || true
	# CNI plugins where kubeadm's packages and the Revision's containerd
	# config look for them (Debian installs them in /usr/lib/cni).
	mkdir -p "$r/opt/cni"
	ln -sfn /usr/lib/cni "$r/opt/cni/bin"
	[ -x "$r/usr/lib/cni/bridge" ] && [ -x "$r/usr/lib/cni/host-local" ] && [ -x "$r/usr/lib/cni/loopback" ] || {
		echo "testbed: CNI plugins bridge, host-local, loopback missing from /usr/lib/cni" >&2; exit 1; }
	# SSH: no host keys in the image (debootstrap's would be shared by every
	# machine); roost-ssh-hostkeys.service runs ssh-keygen -A before sshd.
	rm -f "$r"/etc/ssh/ssh_host_*
	chroot "$r" systemctl enable ssh.service roost-ssh-hostkeys.service >/dev/null 2>&1
	chroot "$r" systemctl is-enabled ssh.service >/dev/null || { echo "testbed: ssh.service not enabled" >&2; exit 1; }
	chroot "$r" systemctl mask systemd-networkd-wait-online.service >/dev/null 2>&1 || true
	# root login only on the serial console of this test OS
	chroot "$r" passwd -d root >/dev/null
	cat > "$r/etc/os-release.roost" <<OS
ROOST_TESTBED=1
ROOST_TESTBED_KEY=$key
OS

	log "pack initrd (cpio + zstd)"
	(cd "$r" && find . -mindepth 1 -print0 | LC_ALL=C sort -z | cpio --null -o -H newc --reproducible --quiet) \
		| zstd -q -T0 -9 > "$work/initrd.img"
	cp "$base/vmlinuz" "$work/vmlinuz"
	sysver=$(chroot "$r" dpkg-query -W -f '${Version}' systemd)
	ignver=$(chroot "$r" dpkg-query -W -f '${Version}' ignition)
	ctrver=$(chroot "$r" dpkg-query -W -f '${Version}' containerd)
	runcver=$(chroot "$r" dpkg-query -W -f '${Version}' runc)
	cat > "$work/testbed.yaml" <<DEF
apiVersion: roost.io/v1
kind: ImageDefinition
name: testbed
version: $(date -u -d "@${SOURCE_DATE_EPOCH:-1793491200}" +%Y.%m).0-$key
channel: test
date: $(date -u -d "@${SOURCE_DATE_EPOCH:-1793491200}" +%Y-%m-%dT%H:%M:%SZ)
description: Roost testbed OS from Debian $suite packages (runs from RAM)
components:
  kernel: "$kver ($kpkgver)"
  systemd: "$sysver"
  ignition: "$ignver"
  containerd: "$ctrver"
  runc: "$runcver"
kernel: {path: vmlinuz}
initrd: {path: initrd.img}
bootloader: {path: /usr/lib/systemd/boot/efi/systemd-bootx64.efi, package: systemd-boot-efi}
DEF
	rm -rf "$work/rootfs"
	touch "$work/done"
	rm -rf "$out"
	mv "$work" "$out"
	trap - EXIT
fi

# --- release bundle --------------------------------------------------------
[ -x "$bin/roost-image" ] || { echo "testbed: $bin/roost-image missing: run make build" >&2; exit 1; }
keyfile=$cache/release-key
[ -f "$keyfile.key" ] || "$bin/roost-image" keygen -o "$keyfile" >/dev/null
"$bin/roost-image" release --manifest "$out/testbed.yaml" --key "$keyfile.key" -o "$cache/bundle"
ln -sfn "$key" "$cache/current"
ls -la "$cache/bundle" >&2

# --- the agent as a system extension -----------------------------------------
# Its version carries the binary's digest: extensions are immutable, so
# every new build is a new version.
agent=$bin/roost-agent
[ -x "$agent" ] || { echo "testbed: $agent missing: run make build" >&2; exit 1; }
agentver=0.0.0-dev.$(sha256sum "$agent" | cut -c1-12)
if [ "$(cat "$cache/roost-agent.version" 2>/dev/null)" != "$agentver" ] || [ ! -f "$cache/roost-agent.raw.manifest.json.sig" ]; then
	rm -f "$cache"/roost-agent.raw*
	"$bin/roost-image" sysext --name roost-agent --version "$agentver" --file "$agent:/usr/bin/roost-agent" \
		--key "$keyfile.key" -o "$cache/roost-agent.raw" >&2
	echo "$agentver" > "$cache/roost-agent.version"
fi
log "agent extension: $cache/roost-agent.raw ($agentver)"
