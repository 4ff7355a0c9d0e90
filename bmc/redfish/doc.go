// Package redfish is a small typed Redfish client for the few resources the
// hub needs: a ComputerSystem's power state, its Reset action and its Boot
// override, and the VirtualMedia of the Manager that manages it
// (InsertMedia, EjectMedia). Type and field names are the DMTF schema names
// (ComputerSystem.v1, Manager.v1, VirtualMedia.v1, Message.v1).
//
// A server's BMC is named by an Address, redfish+https://HOST[:PORT]/redfish/v1/Systems/ID.
// A Client authenticates with HTTP Basic or, with Options.Sessions, a Redfish
// session (X-Auth-Token); it verifies the BMC's TLS certificate unless
// Options.Insecure says not to. A Client implements bmc.BMC; its errors are
// *Error values wrapping the bmc package's sentinels, and neither errors nor
// logs ever carry the credentials.
package redfish
