// Package install prepares a Server's install disk: it chooses the disk
// from a MachineClass's hints (Choose), lays it out as Roost's GPT with an
// EFI System Partition (FAT32) and a STATE partition (ext4) (Prepare), and
// installs systemd-boot at the removable-media path with a loader
// configuration (InstallBootLoader). Install needs UEFI firmware
// (CheckFirmware).
//
// Ownership: a disk is Roost's when its GPT holds exactly the partitions
// ROOST-ESP (EFI System type) and ROOST-STATE (Linux filesystem type) whose
// partition GUIDs are name-based (SHA-1) UUIDs in Namespace derived from
// the disk GUID. Any other partition table or known volume signature is
// foreign; Prepare never overwrites it unless told to wipe.
//
// Operating-system effects (opening block devices, running mkfs.ext4) sit
// behind Disks; OSDisks is the real one and FakeDisks is backed by image
// files and renders its state as text.
package install
