// Package e2e is the main-job end-to-end test (test tier 3): a real hub on
// the host's loopback, the testbed release pushed with roostctl, an
// enrollment ISO built with roost-image, and one UEFI QEMU server
// (software emulation) with an empty disk that enrolls, is assigned to a
// Pool, installs its disk, reboots into its Revision, survives a power
// cycle, takes a new Revision on a label change, and falls back from a
// Revision that never boots. Everything is driven through roostctl.
//
// Run: make build testbed && ROOST_E2E=1 go test -v -timeout 60m ./test/e2e/
// (make e2e does both; images/deps.sh --e2e installs QEMU, OVMF and the
// OpenSSH client). Without ROOST_E2E=1 the test skips.
//
// Files:
//   - vm_test.go: the QEMU server (OVMF with its own variable store, a
//     sparse virtio disk, the ISO as a lower-priority CD-ROM, a management
//     NIC with SSH forwarded to loopback, four isolated NICs for bonds, a
//     serial console appended to a file across power cycles).
//   - roost_test.go: the hub process and roostctl -o json helpers.
//   - main_test.go: TestMainJob.
//   - testdata/fleet.yaml: the NetworkProfile and Pool the test applies.
package e2e
