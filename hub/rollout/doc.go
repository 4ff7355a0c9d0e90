// Package rollout moves each Pool to its newest Revisions safely: the
// leader-only Controller records every Pool's rollout status (target
// release, progress, failures, halts, the next window), and Admit decides
// whether a Server of a Pool may start a reboot now. Both use one planner
// (Plan) over one snapshot of the state, so what `roostctl rollout status`
// shows is what the lease path enforces:
//
//   - a reboot starts only inside one of the Pool's maintenance windows
//     (a Pool without windows is always open); one that started may finish
//     after the window closes (its Lease lasts readyTimeout);
//   - at most maxUnavailable Machines of the Pool are down at once,
//     counting Machines down for any reason (not Ready after having been
//     provisioned, or holding a reboot Lease), not only reboots Roost
//     started;
//   - after a Machine came up on its new Revision the Pool settles for
//     rollout.settle before the next reboot starts;
//   - a Machine whose new Revision failed (it came back on its old one) or
//     that did not boot it within readyTimeout counts as failed; more
//     failures than rollout.failureBudget halt the Pool until an operator
//     resumes it (`roostctl rollout resume`), which acknowledges them; a
//     failed Revision is never retried (the hub renders a new one only
//     when its inputs change). Other Pools continue;
//   - a Machine never provisioned yet (first install) reboots at any time:
//     nothing runs on it. Windows, the settle delay, a pause or a halt do
//     not hold it (its Lease still counts against maxUnavailable in the
//     FSM). The status counts first installs apart from reboots and says
//     what holds only the reboots; a Pool with only first installs left
//     is Progressing, not Waiting.
//
// The Gate is the reboot gate in front of the Lease: AcquireLease admits
// the reboot (Admit), checks a worker's Cluster, records the Lease
// (Draining for a worker) and grants it; the Gate's loop drains a Draining
// Lease's Node and moves it to Granted, driven by the state rather than by
// the agent's requests.
//
// Leases carry fencing tokens and expire (see hub/state), so a Lease of a
// Server that vanished stops counting at its expiry.
package rollout
