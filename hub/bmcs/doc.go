// Package bmcs is the hub's leader-only BMC controller: for every Server
// with spec.bmc it reads the power state through the BMC (BMCReachable,
// status.bmc.powerState), carries out the operations recorded through Raft
// (power on/off/cycle, boot once, provision from virtual media), ejects
// the enrollment media once the Server has enrolled, and power-cycles,
// once per reboot Lease, a Server whose agent did not come back from its
// reboot before the Lease expires. It writes
// only through Raft commands (UpdateServerBMC), and only on a change.
package bmcs
