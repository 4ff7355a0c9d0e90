package printers

import (
	"cmp"
	"fmt"
	"google.golang.org/protobuf/types/known/durationpb"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"
	"k8s.io/apimachinery/pkg/util/duration"

	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
	"github.com/roostfleet/roost/resource"
)

// none is written for an empty cell, as kubectl does.
const none = "<none>"

// column is one table column of a kind.
type column struct {
	header string
	wide   bool // only with wide output
	value  func(r resource.Resource, now time.Time) string
}

// tableColumns are the columns between NAME and AGE, per kind.
var tableColumns = map[string][]column{
	"Server": {
		{header: "UUID", value: func(r resource.Resource, _ time.Time) string { return r.(*roostv1.Server).GetSpec().GetSystemUuid() }},
		{header: "STATE", value: func(r resource.Resource, _ time.Time) string { return ServerStateCell(r.(*roostv1.Server)) }},
		{header: "POOL", value: func(r resource.Resource, _ time.Time) string { return ServerPoolCell(r.(*roostv1.Server)) }},
		{header: "CPUS", value: func(r resource.Resource, _ time.Time) string {
			cpu := r.(*roostv1.Server).GetStatus().GetInventory().GetCpu()
			if n := cpu.GetThreads(); n > 0 {
				return strconv.Itoa(int(n))
			}
			return intCell(int64(cpu.GetCores()))
		}},
		{header: "MEMORY", value: func(r resource.Resource, _ time.Time) string {
			return bytesCell(r.(*roostv1.Server).GetStatus().GetInventory().GetMemoryBytes())
		}},
		{header: "IMAGE", value: func(r resource.Resource, _ time.Time) string {
			return r.(*roostv1.Server).GetStatus().GetImageVersion()
		}},
		{header: "REVISION", value: func(r resource.Resource, _ time.Time) string {
			return intCell(r.(*roostv1.Server).GetStatus().GetBootedRevision())
		}},
		{header: "LAST-SEEN", value: func(r resource.Resource, now time.Time) string {
			cell, _ := ServerLastSeen(r.(*roostv1.Server), now)
			return cell
		}},
		{header: "POWER", wide: true, value: func(r resource.Resource, _ time.Time) string {
			return ServerPowerCell(r.(*roostv1.Server))
		}},
		{header: "AGENT", wide: true, value: func(r resource.Resource, _ time.Time) string {
			return r.(*roostv1.Server).GetStatus().GetAgentVersion()
		}},
		{header: "ARCH", wide: true, value: func(r resource.Resource, _ time.Time) string {
			return r.(*roostv1.Server).GetStatus().GetInventory().GetArch()
		}},
		{header: "FIRMWARE", wide: true, value: func(r resource.Resource, _ time.Time) string {
			return r.(*roostv1.Server).GetStatus().GetInventory().GetFirmware()
		}},
		{header: "DISKS", wide: true, value: func(r resource.Resource, _ time.Time) string {
			var parts []string
			for _, d := range r.(*roostv1.Server).GetStatus().GetInventory().GetDisks() {
				parts = append(parts, d.GetName()+":"+bytesCell(d.GetSizeBytes()))
			}
			return strings.Join(parts, ",")
		}},
		{header: "VENDOR", wide: true, value: func(r resource.Resource, _ time.Time) string {
			sys := r.(*roostv1.Server).GetStatus().GetInventory().GetSystem()
			return strings.TrimSpace(sys.GetVendor() + " " + sys.GetProduct())
		}},
		{header: "TOKEN", wide: true, value: func(r resource.Resource, _ time.Time) string {
			return r.(*roostv1.Server).GetStatus().GetEnrollmentToken()
		}},
		// why the state is what it is: a cleaning's failure, a denial
		{header: "REASON", wide: true, value: func(r resource.Resource, _ time.Time) string {
			return r.(*roostv1.Server).GetStatus().GetStateReason()
		}},
	},
	"Machine": {
		{header: "SERVER", value: func(r resource.Resource, _ time.Time) string { return r.(*roostv1.Machine).GetSpec().GetServer() }},
		{header: "POOL", value: func(r resource.Resource, _ time.Time) string { return r.(*roostv1.Machine).GetSpec().GetPool() }},
		{header: "PHASE", value: func(r resource.Resource, _ time.Time) string { return r.(*roostv1.Machine).GetStatus().GetPhase() }},
		{header: "REVISION", value: func(r resource.Resource, _ time.Time) string { return MachineRevision(r.(*roostv1.Machine)) }},
		{header: "HOSTNAME", wide: true, value: func(r resource.Resource, _ time.Time) string {
			m := r.(*roostv1.Machine)
			if h := m.GetSpec().GetHostname(); h != "" {
				return h
			}
			return m.GetMetadata().GetName()
		}},
		{header: "CLUSTER", wide: true, value: func(r resource.Resource, _ time.Time) string { return r.(*roostv1.Machine).GetStatus().GetCluster() }},
		{header: "NODE", wide: true, value: func(r resource.Resource, _ time.Time) string { return r.(*roostv1.Machine).GetStatus().GetNodeName() }},
		{header: "REASON", wide: true, value: func(r resource.Resource, _ time.Time) string { return MachineReason(r.(*roostv1.Machine)) }},
	},
	"Pool": {
		{header: "CLUSTER", value: func(r resource.Resource, _ time.Time) string { return r.(*roostv1.Pool).GetSpec().GetCluster() }},
		{header: "CLASS", value: func(r resource.Resource, _ time.Time) string { return r.(*roostv1.Pool).GetSpec().GetMachineClass() }},
		{header: "REPLICAS", value: func(r resource.Resource, _ time.Time) string {
			s := r.(*roostv1.Pool).GetSpec()
			if s == nil || s.Replicas == nil {
				return "-"
			}
			return strconv.Itoa(int(s.GetReplicas()))
		}},
		{header: "CHANNEL", value: func(r resource.Resource, _ time.Time) string {
			// A pin wins over the channel, which the pool follows again
			// when unpinned: "=2026.11.0 (stable)".
			s := r.(*roostv1.Pool).GetSpec()
			if v := s.GetImageVersion(); v != "" {
				if ch := s.GetImageChannel(); ch != "" {
					return "=" + v + " (" + ch + ")"
				}
				return "=" + v
			}
			return s.GetImageChannel()
		}},
		{header: "READY", wide: true, value: func(r resource.Resource, _ time.Time) string {
			st := r.(*roostv1.Pool).GetStatus()
			return fmt.Sprintf("%d/%d", st.GetReadyMachines(), st.GetMachines())
		}},
		{header: "ROLLOUT", value: func(r resource.Resource, _ time.Time) string {
			// The rollout phase (Idle, Waiting, Progressing, Settling,
			// Paused, Halted); "-" before the rollout controller ran.
			if ph := r.(*roostv1.Pool).GetStatus().GetRollout().GetPhase(); ph != "" {
				return ph
			}
			return "-"
		}},
		{header: "FROZEN", value: func(r resource.Resource, _ time.Time) string { return PoolFrozenCell(r.(*roostv1.Pool)) }},
		{header: "NETWORK", wide: true, value: func(r resource.Resource, _ time.Time) string { return r.(*roostv1.Pool).GetSpec().GetNetworkProfile() }},
		{header: "WINDOWS", wide: true, value: func(r resource.Resource, _ time.Time) string {
			return strings.Join(r.(*roostv1.Pool).GetSpec().GetMaintenanceWindows(), ",")
		}},
		{header: "MAX-UNAVAILABLE", wide: true, value: func(r resource.Resource, _ time.Time) string {
			mu := r.(*roostv1.Pool).GetSpec().GetRollout().GetMaxUnavailable()
			switch v := mu.GetValue().(type) {
			case *roostv1.IntOrString_IntVal:
				return strconv.Itoa(int(v.IntVal))
			case *roostv1.IntOrString_StrVal:
				return v.StrVal
			}
			return "1"
		}},
	},
	"Cluster": {
		{header: "ENDPOINT", value: func(r resource.Resource, _ time.Time) string { return r.(*roostv1.Cluster).GetSpec().GetApiEndpoint() }},
		{header: "VERSION", value: func(r resource.Resource, _ time.Time) string {
			return r.(*roostv1.Cluster).GetSpec().GetKubernetesVersion()
		}},
		{header: "REACHABLE", value: func(r resource.Resource, _ time.Time) string {
			if st := conditionCell(r.(*roostv1.Cluster).GetStatus().GetConditions(), "Reachable"); st != "" {
				return st
			}
			return "Unknown"
		}},
		{header: "REASON", wide: true, value: func(r resource.Resource, _ time.Time) string {
			for _, c := range r.(*roostv1.Cluster).GetStatus().GetConditions() {
				if c.GetType() == "Reachable" && c.GetStatus() != "True" {
					return c.GetReason()
				}
			}
			return ""
		}},
		// READY/TOTAL Nodes Roost manages, counted while the API answers;
		// "?" while it does not (the hub cannot see them).
		{header: "NODES", value: func(r resource.Resource, _ time.Time) string {
			st := r.(*roostv1.Cluster).GetStatus()
			if conditionCell(st.GetConditions(), "Reachable") != "True" {
				return "?"
			}
			return fmt.Sprintf("%d/%d", st.GetReadyNodes(), st.GetNodes())
		}},
		{header: "SERVER-VERSION", wide: true, value: func(r resource.Resource, _ time.Time) string {
			return r.(*roostv1.Cluster).GetStatus().GetServerVersion()
		}},
		{header: "CREDENTIALS", wide: true, value: func(r resource.Resource, _ time.Time) string {
			if r.(*roostv1.Cluster).GetStatus().GetCredentialsSet() {
				return "<set>"
			}
			return ""
		}},
	},
	"MachineClass": {
		{header: "SELECTOR", value: func(r resource.Resource, _ time.Time) string {
			return strings.Join(r.(*roostv1.MachineClass).GetSpec().GetServerSelector(), ",")
		}},
		{header: "DISK", wide: true, value: func(r resource.Resource, _ time.Time) string {
			d := r.(*roostv1.MachineClass).GetSpec().GetInstallDisk()
			if d.GetMinSize() == "" && d.GetMaxSize() == "" {
				return ""
			}
			return d.GetMinSize() + ".." + d.GetMaxSize()
		}},
		{header: "SSH-KEYS", wide: true, value: func(r resource.Resource, _ time.Time) string {
			return strconv.Itoa(len(r.(*roostv1.MachineClass).GetSpec().GetSshAuthorizedKeys()))
		}},
		{header: "KERNEL-ARGS", wide: true, value: func(r resource.Resource, _ time.Time) string {
			return strings.Join(r.(*roostv1.MachineClass).GetSpec().GetKernelArgs(), " ")
		}},
	},
	"NetworkProfile": {
		{header: "LINKS", value: func(r resource.Resource, _ time.Time) string {
			return strconv.Itoa(len(r.(*roostv1.NetworkProfile).GetSpec().GetLinks()))
		}},
		{header: "BONDS", value: func(r resource.Resource, _ time.Time) string {
			return strconv.Itoa(len(r.(*roostv1.NetworkProfile).GetSpec().GetBonds()))
		}},
		{header: "VLANS", value: func(r resource.Resource, _ time.Time) string {
			return strconv.Itoa(len(r.(*roostv1.NetworkProfile).GetSpec().GetVlans()))
		}},
		{header: "BRIDGES", value: func(r resource.Resource, _ time.Time) string {
			return strconv.Itoa(len(r.(*roostv1.NetworkProfile).GetSpec().GetBridges()))
		}},
		{header: "DNS", wide: true, value: func(r resource.Resource, _ time.Time) string {
			return strings.Join(r.(*roostv1.NetworkProfile).GetSpec().GetDns().GetServers(), ",")
		}},
	},
	"MaintenanceWindow": {
		{header: "RRULE", value: func(r resource.Resource, _ time.Time) string {
			return r.(*roostv1.MaintenanceWindow).GetSpec().GetRrule()
		}},
		{header: "DURATION", value: func(r resource.Resource, _ time.Time) string {
			if d := r.(*roostv1.MaintenanceWindow).GetSpec().GetDuration(); d != nil {
				return resource.FormatDuration(d)
			}
			return ""
		}},
		{header: "TIMEZONE", value: func(r resource.Resource, _ time.Time) string {
			if tz := r.(*roostv1.MaintenanceWindow).GetSpec().GetTimeZone(); tz != "" {
				return tz
			}
			return "UTC"
		}},
		{header: "NEXT OPENING", value: windowNextCell},
	},
	"ImageRelease": {
		{header: "VERSION", value: func(r resource.Resource, _ time.Time) string { return r.(*roostv1.ImageRelease).GetSpec().GetVersion() }},
		{header: "CHANNELS", value: func(r resource.Resource, _ time.Time) string {
			return strings.Join(r.(*roostv1.ImageRelease).GetSpec().GetChannels(), ",")
		}},
		{header: "KUBELET", wide: true, value: func(r resource.Resource, _ time.Time) string {
			return r.(*roostv1.ImageRelease).GetSpec().GetComponents()["kubelet"]
		}},
		{header: "COMPONENTS", wide: true, value: func(r resource.Resource, _ time.Time) string {
			c := r.(*roostv1.ImageRelease).GetSpec().GetComponents()
			var parts []string
			for _, k := range slices.Sorted(maps.Keys(c)) {
				parts = append(parts, k+"="+c[k])
			}
			return strings.Join(parts, ",")
		}},
	},
	"EnrollmentToken": {
		{header: "EXPIRES", value: func(r resource.Resource, now time.Time) string {
			return UntilCell(r.(*roostv1.EnrollmentToken).GetSpec().GetExpiresAt(), now)
		}},
		{header: "USES", value: func(r resource.Resource, _ time.Time) string {
			t := r.(*roostv1.EnrollmentToken)
			limit := "∞"
			if m := t.GetSpec().GetMaxUses(); m > 0 {
				limit = strconv.Itoa(int(m))
			}
			return fmt.Sprintf("%d/%s", t.GetStatus().GetUses(), limit)
		}},
		{header: "POOL", value: func(r resource.Resource, _ time.Time) string { return r.(*roostv1.EnrollmentToken).GetSpec().GetPool() }},
		{header: "STATE", value: func(r resource.Resource, now time.Time) string {
			return resource.TokenState(r.(*roostv1.EnrollmentToken), now)
		}},
		{header: "APPROVAL", wide: true, value: func(r resource.Resource, _ time.Time) string {
			if r.(*roostv1.EnrollmentToken).GetSpec().GetRequireApproval() {
				return "required"
			}
			return "-"
		}},
		{header: "LABELS", wide: true, value: func(r resource.Resource, _ time.Time) string {
			m := r.(*roostv1.EnrollmentToken).GetSpec().GetServerLabels()
			var parts []string
			for _, k := range slices.Sorted(maps.Keys(m)) {
				parts = append(parts, k+"="+m[k])
			}
			return strings.Join(parts, ",")
		}},
	},
	"Lease": {
		{header: "SERVER", value: func(r resource.Resource, _ time.Time) string { return r.(*roostv1.Lease).GetSpec().GetServer() }},
		{header: "FENCING", value: func(r resource.Resource, _ time.Time) string {
			return strconv.FormatUint(r.(*roostv1.Lease).GetSpec().GetFencingToken(), 10)
		}},
		{header: "EXPIRES", value: func(r resource.Resource, now time.Time) string {
			return UntilCell(r.(*roostv1.Lease).GetSpec().GetExpiresAt(), now)
		}},
		{header: "REVISION", value: func(r resource.Resource, _ time.Time) string {
			return strconv.FormatInt(r.(*roostv1.Lease).GetSpec().GetRevision(), 10)
		}},
		{header: "PHASE", value: func(r resource.Resource, _ time.Time) string {
			if p := r.(*roostv1.Lease).GetSpec().GetPhase(); p != "" {
				return p
			}
			return "Granted"
		}},
		{header: "REASON", wide: true, value: func(r resource.Resource, _ time.Time) string { return r.(*roostv1.Lease).GetSpec().GetReason() }},
	},
	"Revision": {
		{header: "SERVER", value: func(r resource.Resource, _ time.Time) string { return r.(*roostv1.Revision).GetSpec().GetServer() }},
		{header: "NUMBER", value: func(r resource.Resource, _ time.Time) string {
			return strconv.FormatInt(r.(*roostv1.Revision).GetSpec().GetNumber(), 10)
		}},
		{header: "IMAGE", value: func(r resource.Resource, _ time.Time) string {
			return r.(*roostv1.Revision).GetSpec().GetImageVersion()
		}},
		{header: "PHASE", value: func(r resource.Resource, _ time.Time) string { return r.(*roostv1.Revision).GetStatus().GetPhase() }},
		{header: "MACHINE", wide: true, value: func(r resource.Resource, _ time.Time) string { return r.(*roostv1.Revision).GetSpec().GetMachine() }},
		{header: "HOSTNAME", wide: true, value: func(r resource.Resource, _ time.Time) string { return r.(*roostv1.Revision).GetSpec().GetHostname() }},
		{header: "REASON", wide: true, value: func(r resource.Resource, _ time.Time) string { return r.(*roostv1.Revision).GetStatus().GetReason() }},
	},
	"Extension":   extensionColumns,
	"ReleaseFeed": releaseFeedColumns,
	"Channel":     channelColumns,
}

// releaseFeedColumns are a ReleaseFeed's: its URL, allowed channels ("*"
// for all), Ready condition (its reason when not True), last poll and
// releases imported; wide adds the failed imports with their reasons.
var releaseFeedColumns = []column{
	{header: "URL", value: func(r resource.Resource, _ time.Time) string { return r.(*roostv1.ReleaseFeed).GetSpec().GetUrl() }},
	{header: "CHANNELS", value: func(r resource.Resource, _ time.Time) string {
		if chs := r.(*roostv1.ReleaseFeed).GetSpec().GetChannels(); len(chs) > 0 {
			return strings.Join(chs, ",")
		}
		return "*"
	}},
	{header: "READY", value: func(r resource.Resource, _ time.Time) string {
		return conditionReasonCell(r.(*roostv1.ReleaseFeed).GetStatus().GetConditions(), "Ready")
	}},
	{header: "LAST POLL", value: func(r resource.Resource, now time.Time) string {
		if t := r.(*roostv1.ReleaseFeed).GetStatus().GetLastPoll(); t != nil {
			return ageCell(t, now)
		}
		return "never"
	}},
	{header: "IMPORTED", value: func(r resource.Resource, _ time.Time) string {
		n := 0
		for _, fr := range r.(*roostv1.ReleaseFeed).GetStatus().GetReleases() {
			if fr.GetState() == "Imported" {
				n++
			}
		}
		return strconv.Itoa(n)
	}},
	{header: "FAILED", wide: true, value: func(r resource.Resource, _ time.Time) string {
		var out []string
		for _, fr := range r.(*roostv1.ReleaseFeed).GetStatus().GetReleases() {
			if fr.GetState() == "ImportFailed" {
				what := fr.GetVersion()
				if x := fr.GetExtension(); x != "" {
					what = x + "-" + what
				}
				out = append(out, what+":"+fr.GetReason())
			}
		}
		return strings.Join(out, ",")
	}},
}

// channelColumns are a Channel's: the channel it follows, its soak and
// minimum Good Machines, its candidate and what the candidate waits for
// (the Promoting condition's reason), and the last release promoted.
var channelColumns = []column{
	{header: "FOLLOWS", value: func(r resource.Resource, _ time.Time) string { return r.(*roostv1.Channel).GetSpec().GetFollows() }},
	{header: "SOAK", value: func(r resource.Resource, _ time.Time) string {
		return resource.FormatDuration(durationpb.New(resource.ChannelSoak(r.(*roostv1.Channel).GetSpec())))
	}},
	{header: "MIN MACHINES", value: func(r resource.Resource, _ time.Time) string {
		return strconv.Itoa(int(resource.ChannelMinMachines(r.(*roostv1.Channel).GetSpec())))
	}},
	{header: "CANDIDATE", value: func(r resource.Resource, _ time.Time) string {
		return orDash(r.(*roostv1.Channel).GetStatus().GetCandidate())
	}},
	{header: "WAITING", value: func(r resource.Resource, _ time.Time) string {
		c := r.(*roostv1.Channel).GetStatus().GetConditions()
		for _, x := range c {
			if x.GetType() == "Promoting" && x.GetStatus() == "True" {
				return x.GetReason()
			}
		}
		return "-"
	}},
	{header: "LAST PROMOTED", value: func(r resource.Resource, _ time.Time) string {
		return orDash(r.(*roostv1.Channel).GetStatus().GetLastPromoted())
	}},
}

// conditionReasonCell is the status of condition typ, with its reason
// when not True ("False/Unreachable"); "-" when conds lack it.
func conditionReasonCell(conds []*roostv1.Condition, typ string) string {
	for _, c := range conds {
		if c.GetType() == typ {
			if c.GetStatus() == "True" || c.GetReason() == "" {
				return c.GetStatus()
			}
			return c.GetStatus() + "/" + c.GetReason()
		}
	}
	return "-"
}

// extensionColumns are an Extension's: its version, architecture ("any"
// when it has none), image size and the first 12 hex digits of its
// sha256; wide adds the extension's name and how many paths it ships.
var extensionColumns = []column{
	{header: "VERSION", value: func(r resource.Resource, _ time.Time) string { return r.(*roostv1.Extension).GetSpec().GetVersion() }},
	{header: "ARCH", value: func(r resource.Resource, _ time.Time) string {
		if a := r.(*roostv1.Extension).GetSpec().GetArchitecture(); a != "" {
			return a
		}
		return "any"
	}},
	{header: "SIZE", value: func(r resource.Resource, _ time.Time) string {
		return bytesCell(r.(*roostv1.Extension).GetSpec().GetImage().GetSize())
	}},
	{header: "SHA256", value: func(r resource.Resource, _ time.Time) string {
		d := r.(*roostv1.Extension).GetSpec().GetImage().GetSha256()
		return d[:min(len(d), 12)]
	}},
	{header: "EXTENSION", wide: true, value: func(r resource.Resource, _ time.Time) string { return r.(*roostv1.Extension).GetSpec().GetName() }},
	{header: "PATHS", wide: true, value: func(r resource.Resource, _ time.Time) string {
		return strconv.Itoa(len(r.(*roostv1.Extension).GetSpec().GetPaths()))
	}},
}

// ownColumns are the kinds whose table has neither NAME nor AGE: their
// tableColumns are the whole row (Events, as kubectl prints them).
var ownColumns = map[string]bool{"Event": true}

// eventColumns are an Event's row: when it was last seen, what and about
// which object; wide adds when it was first seen, who recorded it and the
// Event's own name.
var eventColumns = []column{
	{header: "LAST SEEN", value: func(r resource.Resource, now time.Time) string {
		return ageCell(r.(*roostv1.Event).GetStatus().GetLastTimestamp(), now)
	}},
	{header: "TYPE", value: func(r resource.Resource, _ time.Time) string { return r.(*roostv1.Event).GetSpec().GetType() }},
	{header: "REASON", value: func(r resource.Resource, _ time.Time) string { return r.(*roostv1.Event).GetSpec().GetReason() }},
	{header: "OBJECT", value: func(r resource.Resource, _ time.Time) string {
		return EventObjectCell(r.(*roostv1.Event).GetSpec().GetInvolvedObject())
	}},
	{header: "COUNT", value: func(r resource.Resource, _ time.Time) string {
		return strconv.Itoa(int(r.(*roostv1.Event).GetStatus().GetCount()))
	}},
	{header: "FIRST SEEN", wide: true, value: func(r resource.Resource, now time.Time) string {
		return ageCell(r.(*roostv1.Event).GetStatus().GetFirstTimestamp(), now)
	}},
	{header: "SOURCE", wide: true, value: func(r resource.Resource, _ time.Time) string { return r.(*roostv1.Event).GetSpec().GetSource() }},
	{header: "NAME", wide: true, value: func(r resource.Resource, _ time.Time) string { return r.(*roostv1.Event).GetMetadata().GetName() }},
	{header: "MESSAGE", value: func(r resource.Resource, _ time.Time) string { return r.(*roostv1.Event).GetSpec().GetMessage() }},
}

func init() { tableColumns["Event"] = eventColumns }

// EventObjectCell is an Event's object as kubectl writes it: the lower
// case kind, "/", the name ("pool/workers").
func EventObjectCell(o *roostv1.EventObject) string {
	if k, err := resource.Lookup(o.GetKind()); err == nil {
		return k.Singular + "/" + o.GetName()
	}
	return strings.ToLower(o.GetKind()) + "/" + o.GetName()
}

// Columns returns the table headers PrintTable writes for a kind, NAME
// first and AGE last (for Events: LAST SEEN, TYPE, REASON, OBJECT, COUNT,
// MESSAGE, as kubectl get events).
func Columns(kind *resource.Kind, wide bool) []string {
	if ownColumns[kind.Name] {
		var h []string
		for _, c := range tableColumns[kind.Name] {
			if wide || !c.wide {
				h = append(h, c.header)
			}
		}
		return h
	}
	h := []string{"NAME"}
	for _, c := range tableColumns[kind.Name] {
		if wide || !c.wide {
			h = append(h, c.header)
		}
	}
	return append(h, "AGE")
}

// PrintTable writes objects as a kubectl-style table for `roostctl get`:
// per kind the columns of Columns (wide adds the wide-only ones), NAME
// first and AGE last, AGE being now minus metadata.creationTimestamp in
// kubectl's short form ("45s", "3h", "12d"; "<unknown>" when unset). Objects
// are grouped by kind in order of first appearance, each group with its own
// header and a blank line between groups; when there are several kinds,
// names are written as "kind/name" (lower case singular), as kubectl does.
// Empty cells show "<none>". Nothing is written for no objects. The output
// depends only on the arguments. Errors are those of w, or an empty Object
// envelope.
func PrintTable(w io.Writer, objs []*roostv1.Object, wide bool, now time.Time) error {
	type group struct {
		kind *resource.Kind
		objs []resource.Resource
	}
	var groups []*group
	byKind := map[*resource.Kind]*group{}
	for i, o := range objs {
		r, k := resource.Unwrap(o)
		if r == nil {
			return fmt.Errorf("print: object %d is empty (no kind set)", i)
		}
		g := byKind[k]
		if g == nil {
			g = &group{kind: k}
			byKind[k] = g
			groups = append(groups, g)
		}
		g.objs = append(g.objs, r)
	}
	tw := tabwriter.NewWriter(w, 10, 4, 3, ' ', 0)
	for gi, g := range groups {
		if gi > 0 {
			fmt.Fprintln(tw)
		}
		fmt.Fprintln(tw, strings.Join(Columns(g.kind, wide), "\t"))
		for _, r := range g.objs {
			cells := tableRow(g.kind, r, wide, now)
			if len(groups) > 1 && !ownColumns[g.kind.Name] {
				cells[0] = cell(g.kind.Singular + "/" + r.GetMetadata().GetName())
			}
			fmt.Fprintln(tw, strings.Join(cells, "\t"))
		}
	}
	return tw.Flush()
}

// TableRow returns the cells of o's row in PrintTable's table of its kind
// (Columns names them), or an error for an empty Object envelope.
func TableRow(o *roostv1.Object, wide bool, now time.Time) ([]string, error) {
	r, k := resource.Unwrap(o)
	if r == nil {
		return nil, fmt.Errorf("print: the object is empty (no kind set)")
	}
	return tableRow(k, r, wide, now), nil
}

func tableRow(k *resource.Kind, r resource.Resource, wide bool, now time.Time) []string {
	if ownColumns[k.Name] {
		var cells []string
		for _, c := range tableColumns[k.Name] {
			if wide || !c.wide {
				cells = append(cells, cell(c.value(r, now)))
			}
		}
		return cells
	}
	cells := []string{cell(r.GetMetadata().GetName())}
	for _, c := range tableColumns[k.Name] {
		if wide || !c.wide {
			cells = append(cells, cell(c.value(r, now)))
		}
	}
	return append(cells, ageCell(r.GetMetadata().GetCreationTimestamp(), now))
}

// cell makes a value safe for one table cell.
func cell(s string) string {
	if s == "" {
		return none
	}
	return strings.Map(func(r rune) rune {
		if r == '\t' || r == '\n' || r == '\r' {
			return ' '
		}
		return r
	}, s)
}

func intCell(i int64) string {
	if i == 0 {
		return ""
	}
	return strconv.FormatInt(i, 10)
}

// ageCell is kubectl's AGE: the time since t, or "<unknown>".
func ageCell(t *timestamppb.Timestamp, now time.Time) string {
	if t == nil {
		return "<unknown>"
	}
	return duration.HumanDuration(now.Sub(t.AsTime()))
}

// sinceCell is "5m ago" style, or "" when unset.
func sinceCell(t *timestamppb.Timestamp, now time.Time) string {
	if t == nil {
		return ""
	}
	return duration.HumanDuration(now.Sub(t.AsTime())) + " ago"
}

// UntilCell is the time left until t ("in 3h"), "expired", or "never"
// when unset.
func UntilCell(t *timestamppb.Timestamp, now time.Time) string {
	if t == nil {
		return "never"
	}
	left := t.AsTime().Sub(now)
	if left <= 0 {
		return "expired"
	}
	return "in " + duration.HumanDuration(left)
}

// PoolFrozenCell is a Pool's FROZEN column: the reason of its Frozen
// condition while True (TooManyUnhealthy, ClusterUnreachable,
// OverReplicated: no replacement starts and no reboot is admitted), "-"
// otherwise.
func PoolFrozenCell(p *roostv1.Pool) string {
	for _, c := range p.GetStatus().GetConditions() {
		if c.GetType() == "Frozen" && c.GetStatus() == "True" {
			return cmp.Or(c.GetReason(), "True")
		}
	}
	return "-"
}

// conditionCell is the status of the condition of type typ, or "".
func conditionCell(conds []*roostv1.Condition, typ string) string {
	for _, c := range conds {
		if c.GetType() == typ {
			return c.GetStatus()
		}
	}
	return ""
}

// ServerStateCell is a Server's STATE column: its lifecycle state, then
// ",Unreachable" when no heartbeat arrived within the TTL (never for a
// Decommissioned Server, whose reachability is not tracked),
// ",SchedulingDisabled" when cordoned and ",DuplicateUUID" when another
// Server claims its system UUID — e.g. "Available,Unreachable".
func ServerStateCell(s *roostv1.Server) string {
	st := s.GetStatus().GetState()
	if st == "" {
		st = "Unknown"
	}
	if ServerReachability(s) == "Unreachable" {
		st += ",Unreachable"
	}
	if s.GetSpec().GetUnschedulable() {
		st += ",SchedulingDisabled"
	}
	if conditionCell(s.GetStatus().GetConditions(), "DuplicateUUID") == "True" {
		st += ",DuplicateUUID"
	}
	return st
}

// serverDecommissioned is the Server state in which the hub refuses the
// agent (hub/state.ServerDecommissioned).
const serverDecommissioned = "Decommissioned"

// ServerReachability is a Server's reachability as the displays show it:
// status.reachability ("Reachable", "Unreachable"), or "-" when the hub
// does not track it: liveness leaves Decommissioned Servers out (their
// agents are refused), so what the status recorded before is stale.
func ServerReachability(s *roostv1.Server) string {
	if s.GetStatus().GetState() == serverDecommissioned || s.GetStatus().GetReachability() == "" {
		return "-"
	}
	return s.GetStatus().GetReachability()
}

// ServerLastSeen is when the hub last heard from a Server's agent, as
// 'roostctl get servers' (cell, the LAST-SEEN column) and 'roostctl
// describe server' (detail, the Last Seen line) show it; both come from
// status.reachability and status.lastSeen, so they always agree.
//
// Heartbeats live in the hub leader's memory; the replicated status
// records a time only when the Server enrolls, when its reachability
// changes (the last heartbeat before it turned Unreachable, the first
// after it came back) and when it is denied or decommissioned (its last
// heartbeat then). So:
//
//   - Reachable: "now" — the leader heard it within the heartbeat TTL; the
//     recorded time is when it enrolled or last turned Reachable, and the
//     detail says so;
//   - Unreachable: the recorded last heartbeat, e.g. "4m53s ago";
//   - Decommissioned (not tracked): the recorded last heartbeat too; the
//     hub refuses its agent, so it is not heard from any more.
//
// "never" when nothing was recorded.
func ServerLastSeen(s *roostv1.Server, now time.Time) (cell, detail string) {
	st := s.GetStatus()
	recorded := "never"
	if ts := st.GetLastSeen(); ts != nil {
		recorded = resource.FormatTimestamp(ts) + " (" + sinceCell(ts, now) + ")"
	}
	untracked := ""
	if st.GetState() == serverDecommissioned {
		untracked = "not tracked while " + serverDecommissioned + " (the hub refuses its agent)"
	}
	switch {
	case untracked == "" && st.GetReachability() == "Reachable":
		return "now", "now: Reachable, heard within the heartbeat TTL (heartbeats are kept in the hub leader's memory)\n" +
			"recorded " + recorded + ", when it enrolled or last turned Reachable; the hub records a time only when reachability changes"
	case st.GetLastSeen() == nil:
		if untracked != "" {
			return "never", "never recorded; " + untracked
		}
		return "never", "never recorded"
	case untracked != "":
		return sinceCell(st.GetLastSeen(), now), recorded + "\nthe last heartbeat the hub recorded; " + untracked
	case st.GetReachability() == "Unreachable":
		return sinceCell(st.GetLastSeen(), now), recorded + "\nthe last heartbeat the hub recorded before it turned Unreachable"
	}
	return sinceCell(st.GetLastSeen(), now), recorded
}

// ServerPoolCell is a Server's POOL column: spec.pool, the Pool of the
// Machine that claims it or the Pool its enrollment token pre-assigned it
// to (only that Pool may claim it). A Decommissioned Server is in no Pool
// and cannot be claimed, so its pre-assignment, which the spec keeps for
// when it enrolls again, is not shown ('roostctl describe server' and -o
// yaml show it).
func ServerPoolCell(s *roostv1.Server) string {
	if s.GetStatus().GetState() == serverDecommissioned {
		return ""
	}
	return s.GetSpec().GetPool()
}

// bytesCell writes a byte count in binary units, e.g. "64Gi", "1.5Ti",
// "512Mi"; "" for 0.
func bytesCell(n int64) string {
	if n <= 0 {
		return ""
	}
	units := []string{"", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"}
	f := float64(n)
	i := 0
	for f >= 1024 && i < len(units)-1 {
		f /= 1024
		i++
	}
	if f >= 100 || f == float64(int64(f)) {
		return strconv.FormatFloat(f, 'f', 0, 64) + units[i]
	}
	return strings.TrimSuffix(strings.TrimRight(strconv.FormatFloat(f, 'f', 1, 64), "0"), ".") + units[i]
}

// MachineReason is "Remediating:REASON" for a Machine being replaced
// (hub/remediation: Unreachable, RevisionFailed), else the reason of the
// first milestone condition (Scheduled, Provisioned, Joined, then
// NodeReady, the worker's Node's Ready, then Ready) that does not hold, or
// "" when all hold: why the Machine is not further along.
func MachineReason(m *roostv1.Machine) string {
	conds := m.GetStatus().GetConditions()
	for _, c := range conds {
		if c.GetType() == "Remediating" && c.GetStatus() == "True" {
			return "Remediating:" + c.GetReason()
		}
	}
	for _, typ := range []string{"Scheduled", "Provisioned", "Joined", "NodeReady", "Ready"} {
		for _, c := range conds {
			if c.GetType() == typ && c.GetStatus() != "True" {
				return c.GetReason()
			}
		}
	}
	return ""
}

// MachineRevision is the REVISION cell of a Machine: the booted Revision,
// then "→N" while Revision N is desired, and "(N failed)" for the newest
// failed one; "-" before any Revision.
func MachineRevision(m *roostv1.Machine) string {
	st := m.GetStatus()
	if st.GetRevision() == 0 && st.GetBootedRevision() == 0 {
		return "-"
	}
	out := "-"
	if b := st.GetBootedRevision(); b > 0 {
		out = strconv.FormatInt(b, 10)
	}
	if d := st.GetRevision(); d != st.GetBootedRevision() && d != st.GetFailedRevision() {
		out += "→" + strconv.FormatInt(d, 10)
	}
	if f := st.GetFailedRevision(); f > 0 {
		out += " (" + strconv.FormatInt(f, 10) + " failed)"
	}
	return out
}

// ServerPowerCell is the POWER cell of a Server: the power state its BMC
// last reported (On, Off, …), followed by ",REASON" while the BMC is not
// reachable (BMCReachable=False, e.g. "On,Unauthorized" or
// "Unknown,Timeout"); empty for a Server without a BMC.
func ServerPowerCell(s *roostv1.Server) string {
	if s.GetSpec().GetBmc() == nil && s.GetStatus().GetBmc() == nil {
		return ""
	}
	p := s.GetStatus().GetBmc().GetPowerState()
	if p == "" {
		p = "Unknown"
	}
	for _, c := range s.GetStatus().GetConditions() {
		if c.GetType() == "BMCReachable" && c.GetStatus() == "False" {
			p += "," + c.GetReason()
		}
	}
	return p
}
