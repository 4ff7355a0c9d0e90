// Package bmc is what the hub needs from a Server's baseboard management
// controller: its power state, power on, off and cycle, a one-time boot
// device, and a virtual CD. The BMC interface hides the protocol (Redfish,
// package bmc/redfish) so controllers can be tested with a fake; errors
// wrap the sentinels of this package so a caller can turn any failure into
// a condition reason with Reason, without knowing the protocol.
package bmc
