// Package boot stages Roost Revisions as boot entries on the EFI System
// Partition, reads back which entries systemd-boot tried and gave up on,
// marks the booted entry good, and reaches the operating system effects
// around a reboot (systemd units, mounts) through small interfaces.
//
// # Layout on the ESP
//
// ESP works on the mounted ESP (ROOST-ESP, FAT32, prepared by
// agent/install). Paths below are relative to the ESP root, as the Boot
// Loader Specification (BLS,
// https://uapi-group.org/specifications/specs/boot_loader_specification/)
// writes them in type #1 entries:
//
//	/roost/<first 16 hex digits of sha256>/vmlinuz     kernel, content-addressed
//	/roost/<first 16 hex digits of sha256>/initrd.img  image initrd (the whole root fs)
//	/roost/rev-N/config.img                            newc cpio holding usr/share/oem/config.ign
//	/loader/entries/roost-rev-N+T.conf                 BLS type #1 entry with T boot tries
//
// An entry reads:
//
//	title Roost revision N
//	version N
//	sort-key roost
//	linux /roost/<kernel>/vmlinuz
//	initrd /roost/<initrd>/initrd.img
//	initrd /roost/rev-N/config.img
//	options <kernel args> roost.revision=N
//
// The kernel unpacks both initrds into one root file system, so Ignition
// finds the Revision's config at /usr/share/oem/config.ign.
//
// # Boot counting
//
// Entry file names carry systemd's boot counter (BLS "Boot counting";
// systemd "Automatic Boot Assessment",
// https://systemd.io/AUTOMATIC_BOOT_ASSESSMENT/; systemd-boot(7)):
// roost-rev-N+L-D.conf has L tries left and D tries done. Each time
// systemd-boot boots a counting entry it first renames it, L-1 and D+1
// (roost-rev-7+3.conf → roost-rev-7+2-1.conf → … → roost-rev-7+0-3.conf).
// The agent blesses the entry once the booted Revision is healthy by
// renaming it to roost-rev-N.conf (what systemd-bless-boot.service does),
// which stops the counting: that entry is good. An entry with 0 tries left
// that is not the booted one has failed (Failed).
//
// # Which entry boots
//
// loader/loader.conf (agent/install.LoaderConf) says "default roost-rev-*".
// systemd-boot as shipped by Debian bookworm (systemd 252, src/boot/efi/
// boot.c: config_entry_compare, config_entry_find,
// config_default_entry_select) sorts the entries:
//
//  1. entries with 0 tries left after all others;
//  2. entries with a sort-key before entries without one;
//  3. by sort-key (ascending), then machine-id, then version, newest first
//     (strverscmp-like: 10 after 9, so revision 10 is newer);
//  4. then by file name (id), newest first; then more tries left first.
//
// A default pattern (a glob) picks the first entry in that order whose id
// matches, unless the LoaderEntryOneShot or LoaderEntryDefault EFI
// variables name one. Every Roost entry has sort-key roost and version N,
// so the default is the newest Revision that still has tries left or is
// blessed; once the newest runs out of tries it sorts last and the next
// older roost-rev entry — the previous good one — boots. The counter
// never affects the glob match: "roost-rev-*" matches every counter state.
// "timeout 3" shows the menu for three seconds (0 would hide it unless a
// key is held) and "editor no" forbids editing the kernel command line.
//
// # Power loss
//
// FAT gives no atomic rename across power loss. Stage therefore writes
// every file under a temporary name, fsyncs it, renames it into place and
// fsyncs the directory, and writes the entry last: an entry is never
// visible before the files it references are complete on disk.
//
// # Operating-system effects
//
// Rebooter and Units reach systemd over its private socket
// (/run/systemd/private; no dbus-daemon needed); Mounter mounts file
// systems; FindPartition finds a partition by GPT name. FakeRebooter,
// FakeUnits and FakeMounter stand in for them in tests and render their
// state as text. BootedRevision reads roost.revision=N from the kernel
// command line.
package boot
