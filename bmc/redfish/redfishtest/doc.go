// Package redfishtest is a Redfish BMC emulator for tests, in the spirit of
// sushy-tools: Server serves the Redfish resources a bmc/redfish.Client
// uses (service root, Systems, Managers, VirtualMedia, sessions, the Reset
// and InsertMedia/EjectMedia actions, PATCH of Boot with If-Match) over TLS,
// and acts on a real QEMU through QMP (type QEMU). Power off is a QEMU that
// is not running; power on starts QEMU with the current virtual media and
// boot override on its command line; virtual media changes while it runs go
// through blockdev-change-medium and eject. Faults (a refused password, HTTP
// 500, a BMC that hangs) are set with Server.SetFault for error tests.
package redfishtest
