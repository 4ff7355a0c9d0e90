package revisions

import "github.com/roostfleet/roost/imagebuilder/ignition"

// The persistent journal of every Revision: the OS runs from RAM, so
// without this a boot's journal is lost at the next reboot, and with it
// the story of a Revision that failed and fell back. journald keeps the
// journal in JournalDir, bind-mounted from the STATE partition
// (JournalStateDir), bounded by JournalMaxUse.
//
// The Revision's Ignition config is applied after journald has already
// flushed its early journal to JournalDir in RAM (the image ships the
// directory), so JournalUnit moves it to STATE once Ignition has run:
// journald lets go of JournalDir (journalctl --relinquish-var), this
// boot's files written so far move to STATE under journald's archive
// names (JournalMoveScript), the bind mount comes up, and journald flushes
// to it (journalctl --flush). A Server's machine ID is its SMBIOS UUID, so
// every boot writes one directory, and journald's SystemMaxUse bounds all
// of its boots together, oldest archives dropped first.
const (
	// JournalDir is where journald keeps a persistent journal.
	JournalDir = "/var/log/journal"
	// JournalStateDir holds it on the STATE partition.
	JournalStateDir = StateDir + "/journal"
	// JournalMountUnit bind-mounts JournalStateDir at JournalDir;
	// JournalDirUnit creates it first.
	JournalMountUnit = "var-log-journal.mount"
	JournalDirUnit   = "roost-journal-dir.service"
	// JournalUnit moves the journal to STATE once the Revision's units
	// exist (see above).
	JournalUnit = "roost-journal.service"
	// JournalMoveScript moves this boot's journal files from JournalDir
	// in RAM to JournalStateDir.
	JournalMoveScript = "/etc/roost/journal-to-state.sh"
	// JournaldConfigPath is the hub's journald drop-in.
	JournaldConfigPath = "/etc/systemd/journald.conf.d/10-roost.conf"
	// JournalMaxUse bounds the journal on disk, every boot together
	// (journald's SystemMaxUse).
	JournalMaxUse = "64M"
	// JournalFlushUnit is journald's own flush to JournalDir at boot; its
	// stop (journalctl --smart-relinquish-var) makes journald write to
	// /run again, as a cleaning needs before it detaches STATE.
	JournalFlushUnit = "systemd-journal-flush.service"
)

// journalMoveScript is JournalMoveScript: each *.journal file under
// JournalDir (RAM, before the bind mount) moves to the same machine-ID
// directory under JournalStateDir, renamed like a journal journald
// archived (NAME@BOOTID-SEQNUM-REALTIME.journal), so it neither replaces
// an earlier boot's system.journal nor escapes journald's vacuuming.
// Nothing happens once JournalDir is a mount point (a restart).
const journalMoveScript = `#!/bin/sh
# Roost: move this boot's journal from RAM to the STATE partition (` + JournalUnit + `).
set -eu
src=` + JournalDir + ` dst=` + JournalStateDir + `
if mountpoint -q "$src"; then exit 0; fi
boot=$(tr -d - </proc/sys/kernel/random/boot_id)
now=$(printf %016x "$(($(date +%s) * 1000000))")
for f in "$src"/*/*.journal; do
	[ -e "$f" ] || continue
	id=$(basename "$(dirname "$f")")
	name=$(basename "$f" .journal)
	case $name in
	*@*) new=$name.journal ;;
	*) new=$name@$boot-0000000000000001-$now.journal ;;
	esac
	mkdir -p "$dst/$id"
	mv "$f" "$dst/$id/$new"
done
`

// journalFiles are the journald configuration, JournalMoveScript and the
// units that keep the journal on STATE.
func journalFiles() ([]ignition.File, []ignition.Unit) {
	conf := `# Roost: keep the journal on the STATE partition (` + JournalDir + `), bounded.
[Journal]
Storage=persistent
SystemMaxUse=` + JournalMaxUse + `
`
	units := stateBindMount{
		Dir: JournalStateDir, Where: JournalDir, MountUnit: JournalMountUnit, DirUnit: JournalDirUnit,
		What: "the systemd journal", Mode: "2755",
	}.units()
	units = append(units, ignition.Unit{Name: JournalUnit, Enabled: true, Contents: `# Roost: the journal on the STATE partition from this boot on.
[Unit]
Description=Keep the systemd journal on the STATE partition
Requires=` + JournalDirUnit + `
After=` + JournalDirUnit + ` ` + JournalFlushUnit + `

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/usr/bin/journalctl --relinquish-var
ExecStart=/usr/bin/sh ` + JournalMoveScript + `
ExecStart=/usr/bin/systemctl start ` + JournalMountUnit + `
ExecStart=/usr/bin/journalctl --flush

[Install]
WantedBy=multi-user.target
`})
	return []ignition.File{
		{Path: JournaldConfigPath, Mode: 0o644, Contents: []byte(conf)},
		{Path: JournalMoveScript, Mode: 0o755, Contents: []byte(journalMoveScript)},
	}, units
}
