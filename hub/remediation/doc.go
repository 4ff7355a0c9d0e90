// Package remediation holds two leader-only controllers of Pools, in the
// shape of Gardener's machine-controller-manager:
//
//   - Controller (remediation, as a MachineSet or a Cluster API
//     MachineHealthCheck): a Pool with replicas replaces a Machine whose
//     Server has been Unreachable longer than
//     spec.remediation.unhealthyTimeout, or whose desired Revision failed
//     when spec.remediation.onFailedRevision is "replace". It marks the
//     Machine Remediating (state.MachineRemediating), which takes it out
//     of the Pool's replicas and rollout, so the pool controller
//     (hub/scheduler) claims another matching Server; the failed Machine
//     is released (the ordinary release path) once its Server is
//     reachable again and the Pool has its replicas Ready (a Machine Ready
//     again before any Server could be claimed for it keeps its place: the
//     mark is cleared). At most
//     spec.remediation.maxInFlight replacements (never more than the
//     rollout's maxUnavailable) are under way at once.
//   - SafetyController: sets a Pool's Frozen condition while more than
//     spec.safety.maxUnhealthyPercent of its Machines are unhealthy at
//     once, while its Cluster's API is unreachable, or while it holds more
//     Machines than its replicas; a Frozen Pool starts no replacement and
//     admits no reboot (hub/rollout Admit). It unfreezes by itself.
//   - LeaseCollector: releases the Lease of a Server that is gone or
//     Decommissioned (the FSM already drops a Lease with its Machine; this
//     guards against what an older log or a restore may leave).
//
// Both read the replicated state and write only through Raft commands
// (SetConditions, DeleteMachines).
package remediation
