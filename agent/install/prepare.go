package install

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/diskfs/go-diskfs/disk"
	"github.com/diskfs/go-diskfs/filesystem"
	"github.com/diskfs/go-diskfs/filesystem/fat32"
	"github.com/diskfs/go-diskfs/partition/gpt"
	"github.com/google/uuid"
)

// Partition names and numbers of a Roost install disk.
const (
	ESPName        = "ROOST-ESP"
	StateName      = "ROOST-STATE"
	ESPPartition   = 1
	StatePartition = 2

	// DefaultESPSize is the size of the EFI System Partition: room for a
	// few Revisions' kernels and initrds (the whole OS runs from the initrd).
	DefaultESPSize = 512 << 20
	// MinESPSize is the smallest ESP Prepare makes (go-diskfs v1.9.4 lays
	// out a broken FAT32 at 64 MiB; 100 MiB and up pass fsck.fat).
	MinESPSize = 100 << 20
	// MinStateSize is the smallest STATE partition Prepare makes.
	MinStateSize = 1 << 30

	mib = 1 << 20
)

// Namespace is the UUID namespace of Roost's partition GUIDs: partition
// NAME of the disk with GUID G has GUID uuid.NewSHA1(Namespace, "G/NAME")
// (G lower-case). That, with the names and types, marks a table as Roost's.
var Namespace = uuid.MustParse("8d3a9c52-6f1e-4b7a-9e0c-52f0a7d1c4e3")

// Options of Prepare.
type Options struct {
	// AllowWipe lets Prepare overwrite a disk holding a partition table or
	// volume Roost did not write (MachineClass wipe_foreign_disks).
	AllowWipe bool
	// ESPSize is the EFI System Partition's size; default DefaultESPSize.
	ESPSize int64
	// DiskGUID is the GPT disk GUID to write; default random (tests set it).
	DiskGUID string
}

// Result says what Prepare did; no Actions means the disk was already
// prepared and was left as is.
type Result struct {
	Actions []string
}

// ErrForeignDisk matches a *ForeignError with errors.Is.
var ErrForeignDisk = errors.New("install disk holds a foreign partition table")

// ForeignError is Prepare's refusal of a disk holding something Roost did
// not write.
type ForeignError struct {
	Dev  string
	What string // e.g. "an MBR partition table (2 partitions)"
}

// Is makes errors.Is(err, ErrForeignDisk) true.
func (e *ForeignError) Is(target error) bool { return target == ErrForeignDisk }

func (e *ForeignError) Error() string {
	return fmt.Sprintf("install disk %s holds %s that Roost did not write; refusing to overwrite it "+
		"(set wipeForeignDisks: true on the MachineClass to allow wiping it)", e.Dev, e.What)
}

// PartitionGUID is the GUID of Roost partition name on the disk with GUID
// diskGUID.
func PartitionGUID(diskGUID, name string) string {
	return strings.ToUpper(uuid.NewSHA1(Namespace, []byte(strings.ToLower(diskGUID)+"/"+name)).String())
}

// Prepare lays out dev as Roost's install disk: a GPT with ROOST-ESP
// (EFI System, FAT32, opts.ESPSize from 1 MiB) and ROOST-STATE (Linux
// filesystem, ext4, the rest of the disk, 1 MiB aligned). A disk already
// prepared is left as is (a missing file system on it is made again); a
// disk holding anything else is refused with a *ForeignError unless
// opts.AllowWipe. The layout of a prepared disk is kept whatever
// opts.ESPSize says. dev must not be in use: a block device is opened
// exclusively.
func Prepare(ctx context.Context, d Disks, dev string, opts Options) (*Result, error) {
	if opts.ESPSize == 0 {
		opts.ESPSize = DefaultESPSize
	}
	if opts.ESPSize < MinESPSize || opts.ESPSize%mib != 0 {
		return nil, fmt.Errorf("prepare %s: ESP size %d must be a multiple of 1 MiB and at least 100 MiB", dev, opts.ESPSize)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	dk, err := d.Open(ctx, dev)
	if err != nil {
		return nil, fmt.Errorf("prepare %s: %w", dev, err)
	}
	defer func() {
		if dk != nil {
			dk.Close()
		}
	}()
	res := &Result{}
	st := probe(dk)
	var esp, state *gpt.Partition
	needESP, needState := true, true
	switch {
	case st.roost != nil:
		esp, state = st.roost.Partitions[0], st.roost.Partitions[1]
		needESP = !hasFAT32(dk, esp)
		needState = !hasExt4(dk, state, StateName)
	case st.foreign != "" && !opts.AllowWipe:
		return nil, &ForeignError{Dev: dev, What: st.foreign}
	default:
		if st.foreign != "" {
			res.Actions = append(res.Actions, "wiped "+st.foreign)
		}
		t, err := layout(dk, opts)
		if err != nil {
			return nil, fmt.Errorf("prepare %s: %w", dev, err)
		}
		if err := wipeEnds(dk); err != nil {
			return nil, fmt.Errorf("prepare %s: wipe: %w", dev, err)
		}
		if err := dk.Partition(t); err != nil {
			return nil, fmt.Errorf("prepare %s: write GPT: %w", dev, err)
		}
		// Read it back: go-diskfs knows a partition's sector size only
		// from a table it read (GetStart assumes 512 otherwise).
		rt, err := gpt.Read(dk.Backend, int(dk.LogicalBlocksize), int(dk.PhysicalBlocksize))
		if err != nil || !isRoost(rt) {
			return nil, fmt.Errorf("prepare %s: the GPT written does not read back (%v)", dev, err)
		}
		dk.Table = rt
		esp, state = rt.Partitions[0], rt.Partitions[1]
		res.Actions = append(res.Actions, fmt.Sprintf("wrote GPT %s: %s %s, %s %s",
			t.GUID, ESPName, FormatSize(int64(esp.Size)), StateName, FormatSize(int64(state.Size))))
	}
	if needESP {
		if _, err := dk.CreateFilesystem(disk.FilesystemSpec{Partition: ESPPartition, FSType: filesystem.TypeFat32, VolumeLabel: ESPName}); err != nil {
			return nil, fmt.Errorf("prepare %s: format %s (FAT32): %w", dev, ESPName, err)
		}
		if err := tidyESP(dk, esp); err != nil {
			return nil, fmt.Errorf("prepare %s: format %s (FAT32): %w", dev, ESPName, err)
		}
		res.Actions = append(res.Actions, "formatted "+ESPName+" FAT32")
	}
	ss := dk.LogicalBlocksize
	err = dk.Close()
	dk = nil
	if err != nil {
		return nil, fmt.Errorf("prepare %s: close: %w", dev, err)
	}
	if needState {
		if err := d.MkfsExt4(ctx, dev, int64(state.Start)*ss, int64(state.Size), StateName); err != nil {
			return nil, fmt.Errorf("prepare %s: format %s (ext4): %w", dev, StateName, err)
		}
		res.Actions = append(res.Actions, "formatted "+StateName+" ext4")
	}
	if len(res.Actions) == 0 {
		return res, nil
	}
	// Read it all back.
	dk, err = d.Open(ctx, dev)
	if err != nil {
		return nil, fmt.Errorf("prepare %s: check: %w", dev, err)
	}
	st = probe(dk)
	switch {
	case st.roost == nil:
		err = fmt.Errorf("prepare %s: check: the disk does not read back as Roost's (%s)", dev, st)
	case !hasFAT32(dk, st.roost.Partitions[0]):
		err = fmt.Errorf("prepare %s: check: %s does not read back as FAT32", dev, ESPName)
	case !hasExt4(dk, st.roost.Partitions[1], StateName):
		err = fmt.Errorf("prepare %s: check: %s does not read back as ext4 labelled %s", dev, StateName, StateName)
	}
	if err != nil {
		return nil, err
	}
	return res, nil
}

// layout returns the Roost GPT for dk.
func layout(dk *disk.Disk, opts Options) (*gpt.Table, error) {
	ss := dk.LogicalBlocksize
	if ss != 512 && ss != 4096 {
		return nil, fmt.Errorf("unsupported logical sector size %d", ss)
	}
	guid := opts.DiskGUID
	if guid == "" {
		u, err := uuid.NewRandom()
		if err != nil {
			return nil, err
		}
		guid = u.String()
	}
	u, err := uuid.Parse(guid)
	if err != nil {
		return nil, fmt.Errorf("disk GUID %q: %v", guid, err)
	}
	guid = strings.ToUpper(u.String())

	sectors := dk.Size / ss
	arraySectors := int64(128*128) / ss
	lastUsable := sectors - 1 - arraySectors - 1
	perMiB := mib / ss
	espStart := perMiB
	espEnd := espStart + opts.ESPSize/ss - 1
	stateStart := espEnd + 1
	stateEnd := (lastUsable+1)/perMiB*perMiB - 1
	if (stateEnd-stateStart+1)*ss < MinStateSize {
		return nil, fmt.Errorf("disk of %s is too small: it needs %s (1 MiB + ESP %s + STATE %s + GPT backup)",
			FormatSize(dk.Size), FormatSize(mib+opts.ESPSize+MinStateSize+mib), FormatSize(opts.ESPSize), FormatSize(MinStateSize))
	}
	part := func(i int, name string, typ gpt.Type, start, end int64) *gpt.Partition {
		return &gpt.Partition{Index: i, Start: uint64(start), End: uint64(end), Size: uint64((end - start + 1) * ss),
			Type: typ, Name: name, GUID: PartitionGUID(guid, name)}
	}
	return &gpt.Table{
		LogicalSectorSize:  int(ss),
		PhysicalSectorSize: int(dk.PhysicalBlocksize),
		GUID:               guid,
		ProtectiveMBR:      true,
		Partitions: []*gpt.Partition{
			part(ESPPartition, ESPName, gpt.EFISystemPartition, espStart, espEnd),
			part(StatePartition, StateName, gpt.LinuxFilesystem, stateStart, stateEnd),
		},
	}, nil
}

// wipeEnds zeroes the first and the last MiB of the disk: every partition
// table and the volume signatures probe knows (and md/ZFS labels at the end).
func wipeEnds(dk *disk.Disk) error {
	w, err := dk.Backend.Writable()
	if err != nil {
		return err
	}
	zero := make([]byte, mib)
	n := min(int64(mib), dk.Size)
	if _, err := w.WriteAt(zero[:n], 0); err != nil {
		return err
	}
	if dk.Size > mib {
		off := max(dk.Size-mib, mib)
		if _, err := w.WriteAt(zero[:dk.Size-off], off); err != nil {
			return err
		}
	}
	return nil
}

// probed is what a disk holds: Roost's table, something foreign, or
// nothing (blank).
type probed struct {
	roost   *gpt.Table
	foreign string
}

func (p probed) String() string {
	switch {
	case p.roost != nil:
		return "Roost GPT " + strings.ToUpper(p.roost.GUID)
	case p.foreign != "":
		return "foreign: " + p.foreign
	}
	return "blank"
}

func probe(dk *disk.Disk) probed {
	ss := int(dk.LogicalBlocksize)
	if t, err := gpt.Read(dk.Backend, ss, int(dk.PhysicalBlocksize)); err == nil {
		if isRoost(t) {
			return probed{roost: t}
		}
		var names []string
		for _, p := range t.Partitions {
			if p.Type != gpt.Unused {
				names = append(names, fmt.Sprintf("%q", p.Name))
			}
		}
		return probed{foreign: fmt.Sprintf("a GPT partition table (%d partitions: %s)", len(names), strings.Join(names, ", "))}
	}
	return probed{foreign: signature(dk.Backend, dk.Size)}
}

// isRoost says whether t is a table Prepare wrote.
func isRoost(t *gpt.Table) bool {
	var used []*gpt.Partition
	for _, p := range t.Partitions {
		if p.Type != gpt.Unused {
			used = append(used, p)
		}
	}
	if len(used) != 2 {
		return false
	}
	want := []struct {
		index int
		name  string
		typ   gpt.Type
	}{{ESPPartition, ESPName, gpt.EFISystemPartition}, {StatePartition, StateName, gpt.LinuxFilesystem}}
	for i, w := range want {
		p := used[i]
		if p.Index != w.index || p.Name != w.name || !strings.EqualFold(string(p.Type), string(w.typ)) ||
			!strings.EqualFold(p.GUID, PartitionGUID(t.GUID, w.name)) {
			return false
		}
	}
	t.Partitions = used
	return true
}

// signature names a partition table or volume signature found on a disk
// without a valid GPT, or "" for none.
func signature(r io.ReaderAt, size int64) string {
	at := func(off int64, n int) []byte {
		if off < 0 || off+int64(n) > size {
			return nil
		}
		b := make([]byte, n)
		if _, err := r.ReadAt(b, off); err != nil {
			return nil
		}
		return b
	}
	is := func(off int64, s string) bool { return bytes.Equal(at(off, len(s)), []byte(s)) }
	for _, off := range []int64{512, 4096, size - 512, size - 4096} {
		if is(off, "EFI PART") {
			return "a damaged GPT partition table"
		}
	}
	if b := at(510, 2); bytes.Equal(b, []byte{0x55, 0xaa}) {
		if is(82, "FAT32   ") || is(54, "FAT1") || is(3, "NTFS    ") || is(3, "EXFAT   ") {
			return "a file system on the whole disk (boot sector)"
		}
		n := 0
		for i := 0; i < 4; i++ {
			if e := at(446+int64(i)*16+4, 1); len(e) == 1 && e[0] != 0 {
				n++
			}
		}
		return fmt.Sprintf("an MBR partition table (%d partitions)", n)
	}
	if b := at(1080, 2); bytes.Equal(b, []byte{0x53, 0xef}) {
		return "an ext2/3/4 file system"
	}
	for _, s := range []struct {
		off  int64
		sig  string
		what string
	}{
		{0, "XFSB", "an XFS file system"},
		{65536 + 64, "_BHRfS_M", "a btrfs file system"},
		{0, "LUKS\xba\xbe", "a LUKS volume"},
		{512, "LABELONE", "an LVM physical volume"},
		{0, "LABELONE", "an LVM physical volume"},
		{4096 - 10, "SWAPSPACE2", "a swap area"},
		{32769, "CD001", "an ISO 9660 file system"},
		{0, "\xfc\x4e\x2b\xa9", "an md RAID member"},
		{4096, "\xfc\x4e\x2b\xa9", "an md RAID member"},
	} {
		if is(s.off, s.sig) {
			return s.what
		}
	}
	return ""
}

// tidyESP runs tidyFAT32 on the ESP p of dk.
func tidyESP(dk *disk.Disk, p *gpt.Partition) error {
	w, err := dk.Backend.Writable()
	if err != nil {
		return err
	}
	return tidyFAT32(w, int64(p.Start)*dk.LogicalBlocksize, uint32(p.Start))
}

func hasFAT32(dk *disk.Disk, p *gpt.Partition) bool {
	fs, err := fat32.Read(dk.Backend, int64(p.Size), int64(p.Start)*dk.LogicalBlocksize, dk.LogicalBlocksize)
	return err == nil && fs != nil
}

// ext4Label returns the volume label of the ext2/3/4 file system at off,
// and whether there is one.
func ext4Label(r io.ReaderAt, off int64) (string, bool) {
	sb := make([]byte, 1024)
	if _, err := r.ReadAt(sb, off+1024); err != nil {
		return "", false
	}
	if binary.LittleEndian.Uint16(sb[56:58]) != 0xef53 {
		return "", false
	}
	return string(bytes.TrimRight(sb[120:136], "\x00")), true
}

func hasExt4(dk *disk.Disk, p *gpt.Partition, label string) bool {
	l, ok := ext4Label(dk.Backend, int64(p.Start)*dk.LogicalBlocksize)
	return ok && l == label
}

// Describe renders dev's partition table and file systems as text, one
// partition a line.
func Describe(ctx context.Context, d Disks, dev string) (string, error) {
	dk, err := d.Open(ctx, dev)
	if err != nil {
		return "", err
	}
	defer dk.Close()
	return describe(strings.TrimPrefix(dev, "/dev/"), dk), nil
}

var typeNames = map[gpt.Type]string{
	gpt.EFISystemPartition: "EFI System",
	gpt.LinuxFilesystem:    "Linux filesystem",
	gpt.MicrosoftBasicData: "Microsoft basic data",
	gpt.LinuxSwap:          "Linux swap",
	gpt.LinuxLVM:           "Linux LVM",
	gpt.BIOSBoot:           "BIOS boot",
}

func describe(name string, dk *disk.Disk) string {
	var b strings.Builder
	st := probe(dk)
	fmt.Fprintf(&b, "%s: %s, %d-byte sectors, %s\n", name, FormatSize(dk.Size), dk.LogicalBlocksize, st)
	if st.roost == nil {
		if t, err := gpt.Read(dk.Backend, int(dk.LogicalBlocksize), int(dk.PhysicalBlocksize)); err == nil {
			st.roost = t // render a foreign GPT too
		}
	}
	if st.roost == nil {
		return b.String()
	}
	for _, p := range st.roost.Partitions {
		if p.Type == gpt.Unused {
			continue
		}
		typ := typeNames[gpt.Type(strings.ToUpper(string(p.Type)))]
		if typ == "" {
			typ = string(p.Type)
		}
		fs := "-"
		off := int64(p.Start) * dk.LogicalBlocksize
		if f, err := fat32.Read(dk.Backend, int64(p.Size), off, dk.LogicalBlocksize); err == nil {
			fs = fmt.Sprintf("fat32 %q", strings.TrimSpace(f.Label()))
		} else if l, ok := ext4Label(dk.Backend, off); ok {
			fs = fmt.Sprintf("ext4 %q", l)
		}
		fmt.Fprintf(&b, "  %d %-12s %-17s sectors %d-%d %s guid %s %s\n", p.Index, p.Name, typ, p.Start, p.End,
			FormatSize(int64(p.Size)), p.GUID, fs)
	}
	return b.String()
}
