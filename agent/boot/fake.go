package boot

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
)

// FakeRebooter counts reboots instead of rebooting. Err, when set, is
// returned by Reboot (which then does not count).
type FakeRebooter struct {
	mu      sync.Mutex
	Err     error
	reboots int
}

var _ Rebooter = (*FakeRebooter)(nil)

// Reboot counts one reboot.
func (f *FakeRebooter) Reboot(context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.Err != nil {
		return f.Err
	}
	f.reboots++
	return nil
}

// Reboots is how many reboots were requested.
func (f *FakeRebooter) Reboots() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.reboots
}

// String renders the state, e.g. "reboots: 1".
func (f *FakeRebooter) String() string { return fmt.Sprintf("reboots: %d", f.Reboots()) }

// FakeUnits answers ActiveState from a map; units not in it are in state
// Default, or "inactive" (as systemd reports unknown units) when Default
// is empty.
type FakeUnits struct {
	// Default is the state of every unit not Set (a simulated host sets
	// "active": every unit a Revision requires runs).
	Default string

	mu      sync.Mutex
	states  map[string]string
	reloads int
}

var _ Units = (*FakeUnits)(nil)

// Set sets a unit's state.
func (f *FakeUnits) Set(name, state string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.states == nil {
		f.states = map[string]string{}
	}
	f.states[name] = state
}

// ActiveState returns the unit's state.
func (f *FakeUnits) ActiveState(_ context.Context, name string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if st, ok := f.states[name]; ok {
		return st, nil
	}
	if f.Default != "" {
		return f.Default, nil
	}
	return "inactive", nil
}

// Stop sets the unit's state to "inactive" (recorded, so String shows
// it).
func (f *FakeUnits) Stop(_ context.Context, name string) error {
	f.Set(name, "inactive")
	return nil
}

// Reload counts daemon-reloads (Reloads).
func (f *FakeUnits) Reload(context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reloads++
	return nil
}

// Reloads is how many daemon-reloads were asked for.
func (f *FakeUnits) Reloads() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.reloads
}

// String renders one "name state" line per unit, sorted by name.
func (f *FakeUnits) String() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	lines := make([]string, 0, len(f.states))
	for n, st := range f.states {
		lines = append(lines, n+" "+st)
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// FakeMounter records mounts instead of making them. Mount fails on a dir
// already mounted, Unmount on one not mounted.
type FakeMounter struct {
	mu     sync.Mutex
	mounts map[string]string // dir → "dev fstype"
	shut   map[string]bool   // devices whose file system was shut down
}

var _ Mounter = (*FakeMounter)(nil)

// Mount records dev mounted on dir.
func (f *FakeMounter) Mount(dev, dir, fstype string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.mounts == nil {
		f.mounts = map[string]string{}
	}
	if m, ok := f.mounts[dir]; ok {
		return fmt.Errorf("mount %s on %s: %s is mounted there", dev, dir, m)
	}
	f.mounts[dir] = dev + " " + fstype
	return nil
}

// Unmount forgets the mount on dir.
func (f *FakeMounter) Unmount(dir string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.mounts[dir]; !ok {
		return fmt.Errorf("unmount %s: not mounted", dir)
	}
	delete(f.mounts, dir)
	return nil
}

// Shutdown records the file system on dir as shut down (String marks its
// mounts); dir must be mounted.
func (f *FakeMounter) Shutdown(dir string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	m, ok := f.mounts[dir]
	if !ok {
		return fmt.Errorf("shut down %s: not a mount point", dir)
	}
	if f.shut == nil {
		f.shut = map[string]bool{}
	}
	dev, _, _ := strings.Cut(m, " ")
	f.shut[dev] = true
	return nil
}

// DetachAll forgets every mount of the device mounted on dir and every
// mount below those.
func (f *FakeMounter) DetachAll(dir string) ([]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	m, ok := f.mounts[dir]
	if !ok {
		return nil, fmt.Errorf("detach %s: not a mount point", dir)
	}
	dev, _, _ := strings.Cut(m, " ")
	var tops []string
	for d, mm := range f.mounts {
		if dd, _, _ := strings.Cut(mm, " "); dd == dev {
			tops = append(tops, d)
		}
	}
	var gone []string
	for d := range f.mounts {
		for _, t := range tops {
			if d == t || strings.HasPrefix(d, t+"/") {
				gone = append(gone, d)
				break
			}
		}
	}
	sort.Strings(gone)
	for _, d := range gone {
		delete(f.mounts, d)
	}
	return gone, nil
}

// String renders one "dev on dir type fstype" line per mount, sorted by
// dir, like mount(8), with "(shut down)" after a file system shut down.
func (f *FakeMounter) String() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	dirs := make([]string, 0, len(f.mounts))
	for d := range f.mounts {
		dirs = append(dirs, d)
	}
	sort.Strings(dirs)
	var b strings.Builder
	for _, d := range dirs {
		dev, fstype, _ := strings.Cut(f.mounts[d], " ")
		shut := ""
		if f.shut[dev] {
			shut = " (shut down)"
		}
		fmt.Fprintf(&b, "%s on %s type %s%s\n", dev, d, fstype, shut)
	}
	return b.String()
}

// FakeBoot does to the ESP what systemd-boot does at power-on with
// Roost's entries (systemd "Automatic Boot Assessment"), for simulated
// Servers: it picks the newest revision whose entry has tries left (or is
// blessed), else the newest entry at all; it counts the try on a counting
// entry (roost-rev-N+L-D.conf becomes roost-rev-N+(L-1)-(D+1).conf) and
// returns N. With no Roost entry it returns 0: the Server boots the
// enrollment image (network or ISO), as firmware with an empty boot menu
// falls through to the next boot device.
func (e ESP) FakeBoot() (int64, error) {
	es, err := e.Entries() // newest revision first
	if err != nil || len(es) == 0 {
		return 0, err
	}
	pick := es[0]
	for _, en := range es {
		if !en.Exhausted() {
			pick = en
			break
		}
	}
	if !pick.Counting || pick.TriesLeft == 0 {
		return pick.Revision, nil
	}
	next := fmt.Sprintf("%s%d+%d-%d%s", EntryPrefix, pick.Revision, pick.TriesLeft-1, pick.TriesDone+1, EntrySuffix)
	if err := os.Rename(e.entryPath(pick.Name), e.entryPath(next)); err != nil {
		return 0, fmt.Errorf("count the boot of %s: %w", pick, err)
	}
	return pick.Revision, nil
}
