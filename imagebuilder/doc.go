// Package imagebuilder bakes enrollment ISOs (go-diskfs: ISO 9660 with El
// Torito BIOS and UEFI entries), renders Ignition configs (spec 3.3) and
// builds signed release bundles. It arrives with the image-builder issue.
package imagebuilder
