package revisions

import "github.com/roostfleet/roost/imagebuilder/ignition"

// stateBindMount keeps a directory the OS expects in RAM (Where) on the
// STATE partition instead (Dir), so that it survives reboots: a mount
// unit (MountUnit, the systemd-escaped Where) bind-mounts Dir, after a
// oneshot (DirUnit) created it with Mode once STATE is mounted. Both are
// pulled in by the units that need them, not enabled on their own.
type stateBindMount struct {
	Dir, Where         string
	MountUnit, DirUnit string
	What               string // what the directory holds, for the units' descriptions
	Mode               string // octal permission bits of Dir, e.g. "0700"
}

func (b stateBindMount) units() []ignition.Unit {
	mount := `# Roost: ` + b.What + ` on the STATE partition, so it survives reboots.
[Unit]
Description=` + b.What + ` on the STATE partition
Requires=` + StateMountUnit + ` ` + b.DirUnit + `
After=` + StateMountUnit + ` ` + b.DirUnit + `

[Mount]
What=` + b.Dir + `
Where=` + b.Where + `
Type=none
Options=bind
`
	// No default dependencies: the bind mount is ordered before
	// local-fs.target, and sysinit.target (which services follow by
	// default) after it.
	dir := `# Roost: the directory of ` + b.What + ` on the STATE partition.
[Unit]
Description=Directory of ` + b.What + ` on the STATE partition
DefaultDependencies=no
RequiresMountsFor=` + StateDir + `
Before=` + b.MountUnit + `

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/usr/bin/mkdir -p -m ` + b.Mode + ` ` + b.Dir + `
`
	return []ignition.Unit{{Name: b.MountUnit, Contents: mount}, {Name: b.DirUnit, Contents: dir}}
}
