// Package bmcs is the hub's leader-only BMC controller: for every Server
// with spec.bmc it reads the power state through the BMC (BMCReachable,
// status.bmc.powerState), carries out the operations recorded through Raft
// (power on/off/cycle, boot once, provision from virtual media) and
// ejects the enrollment media once the Server has enrolled. It writes
// only through Raft commands (UpdateServerBMC), and only on a change.
package bmcs
