// Package fleetmetrics exports the fleet's Prometheus series: gauges
// computed from the replicated state at each scrape (Collector: Machines,
// Servers, Revisions, Leases and pool rollouts, by pool and cluster) and
// the events the leader observes where it does the work (Events: lease
// waits, drain durations, enrollments).
//
// Every hub member exports the same fleet gauges from its replicated state
// (a follower may lag the leader by a few entries); dashboards aggregate
// them with max by (...). The event series count only on the member that
// led when the work was done, so they are summed across members. Labels
// are bounded: pool, cluster, phase, state and result, never a Server or
// Machine name.
package fleetmetrics
