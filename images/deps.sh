#!/usr/bin/env bash
# Install the Debian packages the image builder uses on the build host:
# boot loaders baked into enrollment images (isolinux, syslinux-common,
# grub-efi-amd64-bin), systemd-boot for release bundles (systemd-boot-efi),
# mksquashfs for system extensions (squashfs-tools), and, with --e2e /
# --bench, QEMU + OVMF (plus the OpenSSH client and jq the main-job test
# and make demo use) for boot tests and xorriso as the benchmark baseline;
# with --monitoring, prometheus for promtool, which checks the alerting
# rules in docs/monitoring, and systemd-journal-remote, which writes the
# journal files the agent's journal tests read.
# Idempotent; needs root.
set -euo pipefail
pkgs=(isolinux syslinux-common grub-efi-amd64-bin systemd-boot-efi squashfs-tools)
for a in "$@"; do
	case $a in
	--e2e) pkgs+=(qemu-system-x86 ovmf ipxe-qemu openssh-client jq) ;;
	--bench) pkgs+=(xorriso) ;;
	--monitoring) pkgs+=(prometheus systemd-journal-remote) ;;
	*) echo "usage: $0 [--e2e] [--bench] [--monitoring]" >&2; exit 2 ;;
	esac
done
need=()
for p in "${pkgs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || need+=("$p"); done
[ ${#need[@]} -eq 0 ] && exit 0
[ "$(id -u)" = 0 ] || { echo "images/deps.sh: needs root to install ${need[*]}" >&2; exit 1; }
echo "images/deps.sh: installing ${need[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
