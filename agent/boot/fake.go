package boot

import (
	"context"
	"fmt"
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

// FakeUnits answers ActiveState from a map; units not in it are
// "inactive", as systemd reports unknown units.
type FakeUnits struct {
	mu     sync.Mutex
	states map[string]string
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
	return "inactive", nil
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

// String renders one "dev on dir type fstype" line per mount, sorted by
// dir, like mount(8).
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
		fmt.Fprintf(&b, "%s on %s type %s\n", dev, d, fstype)
	}
	return b.String()
}
