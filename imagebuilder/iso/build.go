// Package iso writes enrollment images with go-diskfs: an ISO 9660 image
// with El Torito entries for BIOS (isolinux, with a boot information table)
// and UEFI (GRUB on a FAT ESP image) that is also isohybrid (an MBR with
// isolinux's disk boot code and a partition over the ESP image, and a GPT:
// written to a USB stick it boots under BIOS and UEFI), or a raw GPT disk
// image with an EFI System Partition (UEFI only).
//
// Both hold the kernel, the initrd and an extra initrd (an uncompressed cpio)
// carrying the Ignition config at ConfigPath. Builds are reproducible: all
// timestamps come from Spec.Epoch, entries are sorted, volume serials and
// GUIDs derive from the inputs. Output goes to a temporary file next to the
// destination that is renamed into place only when complete.
package iso

import (
	"crypto/sha256"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	diskfs "github.com/diskfs/go-diskfs"
	"github.com/diskfs/go-diskfs/disk"
	"github.com/diskfs/go-diskfs/filesystem"
	"github.com/diskfs/go-diskfs/filesystem/iso9660"
	"github.com/diskfs/go-diskfs/partition/gpt"

	"github.com/roostfleet/roost/imagebuilder/enrollconfig"
)

// Format is the kind of image.
type Format string

// Formats.
const (
	FormatISO Format = "iso"
	FormatRaw Format = "raw"
)

// Paths inside the image.
const (
	KernelPath    = "boot/vmlinuz"
	InitrdPath    = "boot/initrd.img"
	ConfigInitrd  = "boot/ignition.img"
	ESPImagePath  = "boot/efi.img"
	GrubCfgPath   = "boot/grub/grub.cfg"
	IsolinuxBin   = "isolinux/isolinux.bin"
	IsolinuxCfg   = "isolinux/isolinux.cfg"
	LdlinuxC32    = "isolinux/ldlinux.c32"
	BootCatalog   = "isolinux/boot.cat"
	EFIBootPath   = "EFI/BOOT/BOOTX64.EFI"
	EFIGrubStub   = "EFI/BOOT/grub.cfg"
	DefaultLabel  = "Roost enrollment"
	mib           = 1 << 20
	defaultCmdArg = enrollconfig.KernelArgs
)

// File is an extra file placed in the image (e.g. metadata for inspect).
type File struct {
	Path string
	Data []byte
}

// Progress receives the progress of long steps; total is 0 when unknown.
type Progress func(step string, done, total int64)

// Spec describes an image.
type Spec struct {
	Format Format
	// Kernel and Initrd are paths to the release's kernel and initrd.
	Kernel, Initrd string
	// Config is the Ignition config (JSON), packed at ConfigPath in the
	// extra initrd.
	Config []byte
	// ConfigInitrdFiles are further files of the extra initrd, after the
	// config (system extensions at /etc/extensions/NAME.raw).
	ConfigInitrdFiles []CPIOFile
	// Cmdline are extra kernel arguments after the console arguments.
	Cmdline []string
	// Label is the boot menu entry's title.
	Label string
	// Files are extra files in the image.
	Files []File
	// Loaders are the boot loader binaries (see FindBootLoaders).
	Loaders BootLoaders
	// Epoch is every timestamp in the image.
	Epoch time.Time
	// Progress, when set, is told about long steps.
	Progress Progress
}

// KernelCmdline is the kernel command line the boot loaders pass.
func (s Spec) KernelCmdline() string {
	return strings.TrimSpace(defaultCmdArg + " " + strings.Join(s.Cmdline, " "))
}

type treeFile struct {
	path string // inside the image, no leading slash
	src  string // file on disk, or
	data []byte // content
	size int64
}

// Build writes the image described by spec to out. On error no file is left
// at out (and no temporary file beside it).
func Build(spec Spec, out string) (err error) {
	if spec.Format == "" {
		spec.Format = FormatISO
	}
	if spec.Format != FormatISO && spec.Format != FormatRaw {
		return fmt.Errorf("format %q: want iso or raw", spec.Format)
	}
	if spec.Label == "" {
		spec.Label = DefaultLabel
	}
	if spec.Epoch.IsZero() {
		spec.Epoch = time.Unix(0, 0)
	}
	spec.Epoch = spec.Epoch.UTC().Truncate(2 * time.Second) // FAT's resolution
	if len(spec.Config) == 0 {
		return fmt.Errorf("no Ignition config")
	}
	for what, p := range map[string]string{"kernel": spec.Kernel, "initrd": spec.Initrd} {
		if p == "" {
			return fmt.Errorf("no %s given", what)
		}
		st, err := os.Stat(p)
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		if !st.Mode().IsRegular() || st.Size() == 0 {
			return fmt.Errorf("%s %s: not a non-empty regular file", what, p)
		}
	}
	loaders, err := FindBootLoaders(spec.Loaders, spec.Format == FormatISO)
	if err != nil {
		return err
	}
	spec.Loaders = loaders

	dir := filepath.Dir(out)
	work, err := os.MkdirTemp(dir, ".roost-image-*")
	if err != nil {
		return fmt.Errorf("work dir: %w", err)
	}
	defer os.RemoveAll(work)
	tmpOut := filepath.Join(work, "image")

	files, err := spec.tree()
	if err != nil {
		return err
	}
	switch spec.Format {
	case FormatISO:
		err = buildISO(spec, files, work, tmpOut)
	case FormatRaw:
		err = buildRaw(spec, files, work, tmpOut)
	}
	if err != nil {
		return err
	}
	f, err := os.Open(tmpOut)
	if err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	f.Close()
	if err := os.Chmod(tmpOut, 0o600); err != nil {
		return err
	}
	if err := os.Rename(tmpOut, out); err != nil {
		return fmt.Errorf("rename into place: %w", err)
	}
	return nil
}

// tree lists the files common to both formats.
func (s Spec) tree() ([]treeFile, error) {
	var cpio strings.Builder
	if err := enrollconfig.WriteInitrd(&cpio, s.Config, s.ConfigInitrdFiles, s.Epoch.Unix()); err != nil {
		return nil, err
	}
	files := []treeFile{
		{path: KernelPath, src: s.Kernel},
		{path: InitrdPath, src: s.Initrd},
		{path: ConfigInitrd, data: []byte(cpio.String())},
		{path: GrubCfgPath, data: []byte(s.grubCfg())},
		{path: EFIGrubStub, data: []byte(s.grubStub())},
	}
	for _, f := range s.Files {
		p := strings.TrimPrefix(path.Clean("/"+f.Path), "/")
		files = append(files, treeFile{path: p, data: f.Data})
	}
	for i := range files {
		if files[i].src != "" {
			st, err := os.Stat(files[i].src)
			if err != nil {
				return nil, err
			}
			files[i].size = st.Size()
		} else {
			files[i].size = int64(len(files[i].data))
		}
	}
	return files, nil
}

// VolumeLabel is the image's ISO 9660 volume identifier and ESP label:
// "RST" and 8 hex digits of the config's digest, so GRUB finds this very
// image (search --label) and not another Roost medium.
func (s Spec) VolumeLabel() string {
	h := sha256.Sum256(s.Config)
	return strings.ToUpper(fmt.Sprintf("RST%x", h[:4]))
}

// grubStub is EFI/BOOT/grub.cfg: Debian's CD GRUB image sources it (from
// the directory it was started from) when it finds no /.disk/info; it
// finds the medium by label and loads the real config.
func (s Spec) grubStub() string {
	return fmt.Sprintf(`search --no-floppy --label --set=root %s
set prefix=($root)/boot/grub
configfile $prefix/grub.cfg
`, s.VolumeLabel())
}

func (s Spec) grubCfg() string {
	return fmt.Sprintf(`serial --unit=0 --speed=115200
terminal_input console serial
terminal_output console serial
set timeout=2
set default=0
menuentry %q {
	linux /%s %s
	initrd /%s /%s
}
`, s.Label, KernelPath, s.KernelCmdline(), InitrdPath, ConfigInitrd)
}

func (s Spec) isolinuxCfg() string {
	return fmt.Sprintf(`SERIAL 0 115200
DEFAULT roost
PROMPT 0
TIMEOUT 20
SAY %s
LABEL roost
  MENU LABEL %s
  KERNEL /%s
  INITRD /%s,/%s
  APPEND %s
`, s.Label, s.Label, KernelPath, InitrdPath, ConfigInitrd, s.KernelCmdline())
}

// stage puts files into the directory root: links (or copies) of source
// files and written content, every timestamp set to epoch.
func stage(root string, files []treeFile, epoch time.Time) error {
	dirs := map[string]bool{}
	for _, f := range files {
		dst := filepath.Join(root, filepath.FromSlash(f.path))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		for d := path.Dir(f.path); d != "."; d = path.Dir(d) {
			dirs[d] = true
		}
		if f.src != "" {
			if err := os.Link(f.src, dst); err != nil {
				if err := copyFile(f.src, dst); err != nil {
					return err
				}
			}
		} else if err := os.WriteFile(dst, f.data, 0o644); err != nil {
			return err
		}
	}
	for d := range dirs {
		if err := os.Chtimes(filepath.Join(root, d), epoch, epoch); err != nil {
			return err
		}
	}
	return os.Chtimes(root, epoch, epoch)
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

func sum(files []treeFile) int64 {
	var n int64
	for _, f := range files {
		n += f.size
	}
	return n
}

func buildISO(spec Spec, files []treeFile, work, out string) error {
	// The ESP image: GRUB as the removable-media boot path.
	espFiles := []treeFile{{path: EFIBootPath, src: spec.Loaders.GrubEFI}, {path: EFIGrubStub, data: []byte(spec.grubStub()), size: int64(len(spec.grubStub()))}}
	st, err := os.Stat(spec.Loaders.GrubEFI)
	if err != nil {
		return err
	}
	espFiles[0].size = st.Size()
	espPath := filepath.Join(work, "efi.img")
	if err := writeFATImage(espPath, espFiles, spec.Epoch, "EFI", nil); err != nil {
		return fmt.Errorf("ESP image: %w", err)
	}
	st, _ = os.Stat(espPath)
	all := append([]treeFile{}, files...)
	all = append(all,
		treeFile{path: ESPImagePath, src: espPath, size: st.Size()},
		treeFile{path: EFIBootPath, src: spec.Loaders.GrubEFI, size: espFiles[0].size},
		treeFile{path: IsolinuxBin, src: spec.Loaders.Isolinux},
		treeFile{path: LdlinuxC32, src: spec.Loaders.Ldlinux},
		treeFile{path: IsolinuxCfg, data: []byte(spec.isolinuxCfg())},
	)
	for i := range all {
		if all[i].src != "" && all[i].size == 0 {
			st, err := os.Stat(all[i].src)
			if err != nil {
				return err
			}
			all[i].size = st.Size()
		}
		if all[i].data != nil {
			all[i].size = int64(len(all[i].data))
		}
	}
	tree := filepath.Join(work, "tree")
	if err := stage(tree, all, spec.Epoch); err != nil {
		return err
	}
	return WriteISO(tree, out, ISOOptions{Epoch: spec.Epoch, Progress: spec.Progress, Bootable: true, VolumeID: spec.VolumeLabel(), HybridMBR: spec.Loaders.IsohybridMBR})
}

// ISOOptions tune WriteISO.
type ISOOptions struct {
	Epoch    time.Time
	Progress Progress
	// VolumeID is the volume identifier (A-Z, 0-9, _).
	VolumeID string
	// noFastCopy makes go-diskfs copy every file itself (tests compare).
	noFastCopy bool
	// Bootable adds the El Torito entries (the tree must hold IsolinuxBin
	// and ESPImagePath).
	Bootable bool
	// HybridMBR, with Bootable, is the isohybrid MBR boot code
	// (isohdpfx.bin) that makes the image bootable from a disk too (see
	// makeHybrid); empty writes a plain ISO.
	HybridMBR string
}

// WriteISO writes the directory tree (which it consumes: go-diskfs removes
// its workspace) as an ISO 9660 image with Joliet names to out.
func WriteISO(tree, out string, o ISOOptions) error {
	var hybridCode []byte
	if o.Bootable && o.HybridMBR != "" {
		var err error
		if hybridCode, err = readHybridMBR(o.HybridMBR); err != nil {
			return err
		}
	}
	var total int64
	_ = filepath.Walk(tree, func(p string, fi os.FileInfo, err error) error {
		if err == nil {
			if !fi.IsDir() {
				total += fi.Size()
			}
			_ = os.Chtimes(p, o.Epoch, o.Epoch)
		}
		return nil
	})
	f, err := os.OpenFile(out, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("create %s: %w", out, err)
	}
	defer f.Close()
	if err := f.Truncate(total + 16*mib); err != nil {
		return err
	}
	var stubs []*stub
	var magic []byte
	if !o.noFastCopy {
		hold, err := os.MkdirTemp(filepath.Dir(out), ".roost-hold-*")
		if err != nil {
			return err
		}
		defer os.RemoveAll(hold)
		skip := map[string]bool{}
		if o.Bootable {
			skip[IsolinuxBin], skip[ESPImagePath] = true, true
		}
		if stubs, magic, err = stubFiles(tree, hold, skip); err != nil {
			return fmt.Errorf("stage files: %w", err)
		}
	}
	if o.VolumeID == "" {
		o.VolumeID = "ROOST"
	}
	be := &skipZeroBackend{f: f, magic: magic, stubs: stubs}
	isofs, err := iso9660.Create(be, 0, 0, sector, tree)
	if err != nil {
		return fmt.Errorf("create ISO 9660: %w", err)
	}
	opts := iso9660.FinalizeOptions{Joliet: false, VolumeIdentifier: o.VolumeID, PublisherIdentifier: "ROOST"}
	if o.Bootable {
		bios := &iso9660.ElToritoEntry{Platform: iso9660.BIOS, Emulation: iso9660.NoEmulation, BootFile: IsolinuxBin, BootTable: true}
		bios.SetLoadSize(4)
		efi := &iso9660.ElToritoEntry{Platform: iso9660.EFI, Emulation: iso9660.NoEmulation, BootFile: ESPImagePath}
		opts.ElTorito = &iso9660.ElTorito{BootCatalog: BootCatalog, Entries: []*iso9660.ElToritoEntry{bios, efi}}
	}
	stop := watch(out, "write ISO", total, o.Progress)
	err = isofs.Finalize(opts)
	if err == nil && len(stubs) > 0 {
		err = fillStubs(f, stubs, nil, total)
	}
	stop()
	if err != nil {
		return fmt.Errorf("write ISO 9660: %w", err)
	}
	size, err := normalizeISO(f, o.Epoch)
	if err != nil {
		return fmt.Errorf("normalize ISO: %w", err)
	}
	if hybridCode != nil {
		if size, err = makeHybrid(f, size, hybridCode); err != nil {
			return fmt.Errorf("isohybrid: %w", err)
		}
	}
	if err := f.Truncate(size); err != nil {
		return err
	}
	return f.Close()
}

// watch reports the growth of file p (its allocated bytes) every 200 ms.
func watch(p, step string, total int64, progress Progress) func() {
	if progress == nil {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				progress(step, total, total)
				return
			case <-t.C:
				var st syscall.Stat_t
				if syscall.Stat(p, &st) == nil {
					n := st.Blocks * 512
					if n > total {
						n = total
					}
					progress(step, n, total)
				}
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

// fatType picks the FAT variant and image size for content bytes
// (go-diskfs: FAT12 for small images, FAT16 from 8 MiB, FAT32 from ~34 MiB).
func fatType(content int64) (filesystem.Type, int64) {
	need := content + content/16 + 2*mib
	need = (need + mib - 1) / mib * mib
	switch {
	case need <= 2*mib:
		return filesystem.TypeFat12, 2 * mib
	case need <= 32*mib:
		if need < 8*mib {
			need = 8 * mib
		}
		return filesystem.TypeFat16, need
	default:
		if need < 40*mib {
			need = 40 * mib
		}
		return filesystem.TypeFat32, need
	}
}

var epochEnvMu sync.Mutex

// withEpoch runs fn with SOURCE_DATE_EPOCH set (go-diskfs' FAT writer
// takes file times from it).
func withEpoch(epoch time.Time, fn func() error) error {
	epochEnvMu.Lock()
	defer epochEnvMu.Unlock()
	old, had := os.LookupEnv("SOURCE_DATE_EPOCH")
	os.Setenv("SOURCE_DATE_EPOCH", strconv.FormatInt(epoch.Unix(), 10))
	defer func() {
		if had {
			os.Setenv("SOURCE_DATE_EPOCH", old)
		} else {
			os.Unsetenv("SOURCE_DATE_EPOCH")
		}
	}()
	return fn()
}

// writeFATImage writes a FAT image file holding files.
func writeFATImage(out string, files []treeFile, epoch time.Time, label string, progress Progress) error {
	typ, size := fatType(sum(files))
	d, err := diskfs.Create(out, size, diskfs.SectorSizeDefault)
	if err != nil {
		return err
	}
	defer d.Close()
	return withEpoch(epoch, func() error {
		fs, err := d.CreateFilesystem(disk.FilesystemSpec{Partition: 0, FSType: typ, VolumeLabel: label, Reproducible: true})
		if err != nil {
			return err
		}
		return fillFAT(fs, files, progress)
	})
}

func fillFAT(fs filesystem.FileSystem, files []treeFile, progress Progress) error {
	sorted := append([]treeFile{}, files...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].path < sorted[j].path })
	made := map[string]bool{}
	total := sum(sorted)
	var done int64
	for _, f := range sorted {
		var parts []string
		for d := path.Dir(f.path); d != "."; d = path.Dir(d) {
			parts = append([]string{d}, parts...)
		}
		for _, d := range parts {
			if !made[d] {
				if err := fs.Mkdir("/" + d); err != nil {
					return fmt.Errorf("mkdir %s: %w", d, err)
				}
				made[d] = true
			}
		}
		w, err := fs.OpenFile("/"+f.path, os.O_CREATE|os.O_RDWR)
		if err != nil {
			return fmt.Errorf("create %s: %w", f.path, err)
		}
		var r io.Reader
		if f.src != "" {
			in, err := os.Open(f.src)
			if err != nil {
				return err
			}
			defer in.Close()
			r = in
		} else {
			r = strings.NewReader(string(f.data))
		}
		buf := make([]byte, 4*mib)
		for {
			n, rerr := r.Read(buf)
			if n > 0 {
				if _, err := w.Write(buf[:n]); err != nil {
					return fmt.Errorf("write %s: %w", f.path, err)
				}
				done += int64(n)
				if progress != nil {
					progress("write ESP", done, total)
				}
			}
			if rerr == io.EOF {
				break
			}
			if rerr != nil {
				return rerr
			}
		}
		if err := w.Close(); err != nil {
			return err
		}
	}
	return nil
}

func guid(seed []byte, salt string) string {
	h := sha256.Sum256(append([]byte(salt), seed...))
	b := h[:16]
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%X-%X-%X-%X-%X", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

func buildRaw(spec Spec, files []treeFile, work, out string) error {
	st, err := os.Stat(spec.Loaders.GrubEFI)
	if err != nil {
		return err
	}
	all := append([]treeFile{}, files...)
	all = append(all, treeFile{path: EFIBootPath, src: spec.Loaders.GrubEFI, size: st.Size()})
	_, espSize := fatType(sum(all))
	if espSize < 40*mib {
		espSize = 40 * mib
	}
	const start = 2048 // sectors: 1 MiB
	espSectors := uint64(espSize / 512)
	total := int64(start*512) + espSize + mib
	d, err := diskfs.Create(out, total, diskfs.SectorSizeDefault)
	if err != nil {
		return err
	}
	defer d.Close()
	table := &gpt.Table{
		LogicalSectorSize:  512,
		PhysicalSectorSize: 512,
		ProtectiveMBR:      true,
		GUID:               guid(spec.Config, "disk"),
		Partitions: []*gpt.Partition{{
			Index: 1,
			Start: start,
			End:   start + espSectors - 1,
			Type:  gpt.EFISystemPartition,
			Name:  "EFI-SYSTEM",
			GUID:  guid(spec.Config, "esp"),
		}},
	}
	if err := d.Partition(table); err != nil {
		return fmt.Errorf("partition: %w", err)
	}
	return withEpoch(spec.Epoch, func() error {
		fs, err := d.CreateFilesystem(disk.FilesystemSpec{Partition: 1, FSType: filesystem.TypeFat32, VolumeLabel: spec.VolumeLabel(), Reproducible: true})
		if err != nil {
			return fmt.Errorf("ESP: %w", err)
		}
		return fillFAT(fs, all, spec.Progress)
	})
}
