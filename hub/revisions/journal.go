package revisions

import "github.com/roostfleet/roost/imagebuilder/ignition"

// The persistent journal of every Revision: the OS runs from RAM, so
// without this a boot's journal is lost at the next reboot, and with it
// the story of a Revision that failed and fell back. journald keeps the
// journal in JournalDir, bind-mounted from the STATE partition
// (JournalStateDir), bounded by JournalMaxUse; the agent removes the
// journals of older boots beyond its own bound (each boot draws a new
// machine ID, hence a directory of its own; agent.PruneJournals).
const (
	// JournalDir is where journald keeps a persistent journal.
	JournalDir = "/var/log/journal"
	// JournalStateDir holds it on the STATE partition.
	JournalStateDir = StateDir + "/journal"
	// JournalMountUnit bind-mounts JournalStateDir at JournalDir;
	// JournalDirUnit creates it first.
	JournalMountUnit = "var-log-journal.mount"
	JournalDirUnit   = "roost-journal-dir.service"
	// JournaldConfigPath is the hub's journald drop-in.
	JournaldConfigPath = "/etc/systemd/journald.conf.d/10-roost.conf"
	// JournalMaxUse bounds the current boot's journal on disk
	// (journald's SystemMaxUse).
	JournalMaxUse = "64M"
	// JournalFlushUnit moves the journal from /run to JournalDir once it
	// is mounted.
	JournalFlushUnit = "systemd-journal-flush.service"
)

// journalFiles are the journald configuration and the units that keep the
// journal on STATE.
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
	// journald flushes /run/log/journal to the disk once the bind mount
	// is there
	units = append(units, ignition.Unit{Name: JournalFlushUnit, Dropins: map[string]string{"10-roost.conf": `[Unit]
Requires=` + JournalMountUnit + `
After=` + JournalMountUnit + `
`}})
	return []ignition.File{{Path: JournaldConfigPath, Mode: 0o644, Contents: []byte(conf)}}, units
}
