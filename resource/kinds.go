package resource

import (
	"fmt"
	"sort"
	"strings"

	"google.golang.org/protobuf/proto"

	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// APIVersion is the apiVersion every Roost manifest carries.
const APIVersion = "roost.io/v1"

// Resource is the common shape of every generated resource message: the
// Kubernetes-style envelope fields.
type Resource interface {
	proto.Message
	GetApiVersion() string
	GetKind() string
	GetMetadata() *roostv1.ObjectMeta
}

// Kind describes one resource kind.
type Kind struct {
	// Name is the CamelCase kind as written in manifests, e.g. "MachineClass".
	Name string
	// Singular and Plural are the lower-case names, e.g. "machineclass", "machineclasses".
	Singular, Plural string
	// Short are the abbreviations accepted on the command line, e.g. "mc".
	Short []string
	// Appliable says whether users may create the kind with `roostctl apply`.
	// Other kinds are written by the hub and agents.
	Appliable bool
	// New returns an empty message of the kind.
	New func() Resource
	// wrap puts a message of this kind into an Object.
	wrap func(Resource) *roostv1.Object
}

// Wrap puts r, which must be of kind k, into an Object envelope.
func (k *Kind) Wrap(r Resource) *roostv1.Object { return k.wrap(r) }

var kinds = []*Kind{
	{Name: "Server", Singular: "server", Plural: "servers", Short: []string{"srv"},
		New: func() Resource { return &roostv1.Server{} },
		wrap: func(r Resource) *roostv1.Object {
			return &roostv1.Object{Kind: &roostv1.Object_Server{Server: r.(*roostv1.Server)}}
		}},
	{Name: "Machine", Singular: "machine", Plural: "machines", Short: []string{"m"},
		New: func() Resource { return &roostv1.Machine{} },
		wrap: func(r Resource) *roostv1.Object {
			return &roostv1.Object{Kind: &roostv1.Object_Machine{Machine: r.(*roostv1.Machine)}}
		}},
	{Name: "Pool", Singular: "pool", Plural: "pools", Short: []string{"pl"}, Appliable: true,
		New: func() Resource { return &roostv1.Pool{} },
		wrap: func(r Resource) *roostv1.Object {
			return &roostv1.Object{Kind: &roostv1.Object_Pool{Pool: r.(*roostv1.Pool)}}
		}},
	{Name: "Cluster", Singular: "cluster", Plural: "clusters", Short: []string{"cl"}, Appliable: true,
		New: func() Resource { return &roostv1.Cluster{} },
		wrap: func(r Resource) *roostv1.Object {
			return &roostv1.Object{Kind: &roostv1.Object_Cluster{Cluster: r.(*roostv1.Cluster)}}
		}},
	{Name: "MachineClass", Singular: "machineclass", Plural: "machineclasses", Short: []string{"mc"}, Appliable: true,
		New: func() Resource { return &roostv1.MachineClass{} },
		wrap: func(r Resource) *roostv1.Object {
			return &roostv1.Object{Kind: &roostv1.Object_MachineClass{MachineClass: r.(*roostv1.MachineClass)}}
		}},
	{Name: "NetworkProfile", Singular: "networkprofile", Plural: "networkprofiles", Short: []string{"np", "netprofile", "netprofiles"}, Appliable: true,
		New: func() Resource { return &roostv1.NetworkProfile{} },
		wrap: func(r Resource) *roostv1.Object {
			return &roostv1.Object{Kind: &roostv1.Object_NetworkProfile{NetworkProfile: r.(*roostv1.NetworkProfile)}}
		}},
	{Name: "MaintenanceWindow", Singular: "maintenancewindow", Plural: "maintenancewindows", Short: []string{"mw", "window", "windows"}, Appliable: true,
		New: func() Resource { return &roostv1.MaintenanceWindow{} },
		wrap: func(r Resource) *roostv1.Object {
			return &roostv1.Object{Kind: &roostv1.Object_MaintenanceWindow{MaintenanceWindow: r.(*roostv1.MaintenanceWindow)}}
		}},
	{Name: "ImageRelease", Singular: "imagerelease", Plural: "imagereleases", Short: []string{"ir", "image", "images"},
		New: func() Resource { return &roostv1.ImageRelease{} },
		wrap: func(r Resource) *roostv1.Object {
			return &roostv1.Object{Kind: &roostv1.Object_ImageRelease{ImageRelease: r.(*roostv1.ImageRelease)}}
		}},
	{Name: "EnrollmentToken", Singular: "enrollmenttoken", Plural: "enrollmenttokens", Short: []string{"et", "token", "tokens"},
		New: func() Resource { return &roostv1.EnrollmentToken{} },
		wrap: func(r Resource) *roostv1.Object {
			return &roostv1.Object{Kind: &roostv1.Object_EnrollmentToken{EnrollmentToken: r.(*roostv1.EnrollmentToken)}}
		}},
	{Name: "Lease", Singular: "lease", Plural: "leases", Short: []string{"ls"},
		New: func() Resource { return &roostv1.Lease{} },
		wrap: func(r Resource) *roostv1.Object {
			return &roostv1.Object{Kind: &roostv1.Object_Lease{Lease: r.(*roostv1.Lease)}}
		}},
	{Name: "Revision", Singular: "revision", Plural: "revisions", Short: []string{"rev", "revs"},
		New: func() Resource { return &roostv1.Revision{} },
		wrap: func(r Resource) *roostv1.Object {
			return &roostv1.Object{Kind: &roostv1.Object_Revision{Revision: r.(*roostv1.Revision)}}
		}},
	// Extensions are pushed with 'roostctl extension push', not applied.
	{Name: "Extension", Singular: "extension", Plural: "extensions", Short: []string{"ext", "exts"},
		New: func() Resource { return &roostv1.Extension{} },
		wrap: func(r Resource) *roostv1.Object {
			return &roostv1.Object{Kind: &roostv1.Object_Extension{Extension: r.(*roostv1.Extension)}}
		}},
	// Release feeds are polled by the leader (hub/feeds); Channels are
	// promotion policies (hub/feeds' promotion controller).
	{Name: "ReleaseFeed", Singular: "releasefeed", Plural: "releasefeeds", Short: []string{"feed", "feeds", "rf"}, Appliable: true,
		New: func() Resource { return &roostv1.ReleaseFeed{} },
		wrap: func(r Resource) *roostv1.Object {
			return &roostv1.Object{Kind: &roostv1.Object_ReleaseFeed{ReleaseFeed: r.(*roostv1.ReleaseFeed)}}
		}},
	{Name: "Channel", Singular: "channel", Plural: "channels", Short: []string{"chan"}, Appliable: true,
		New: func() Resource { return &roostv1.Channel{} },
		wrap: func(r Resource) *roostv1.Object {
			return &roostv1.Object{Kind: &roostv1.Object_Channel{Channel: r.(*roostv1.Channel)}}
		}},
	// Events are recorded by the hub (the operations log), never applied.
	{Name: "Event", Singular: "event", Plural: "events", Short: []string{"ev"},
		New: func() Resource { return &roostv1.Event{} },
		wrap: func(r Resource) *roostv1.Object {
			return &roostv1.Object{Kind: &roostv1.Object_Event{Event: r.(*roostv1.Event)}}
		}},
}

var byAlias = func() map[string]*Kind {
	m := map[string]*Kind{}
	for _, k := range kinds {
		for _, a := range append([]string{strings.ToLower(k.Name), k.Singular, k.Plural}, k.Short...) {
			m[a] = k
		}
	}
	return m
}()

// Kinds returns every kind, in a stable order.
func Kinds() []*Kind { return kinds }

// KindNames returns the CamelCase names of every kind, sorted.
func KindNames() []string {
	var names []string
	for _, k := range kinds {
		names = append(names, k.Name)
	}
	sort.Strings(names)
	return names
}

// Lookup finds a kind by its CamelCase name or any alias (singular, plural,
// short), case-insensitively. It returns an error that lists the known kinds
// when nothing matches.
func Lookup(name string) (*Kind, error) {
	if k, ok := byAlias[strings.ToLower(name)]; ok {
		return k, nil
	}
	return nil, fmt.Errorf("unknown kind %q (known kinds: %s)", name, strings.Join(KindNames(), ", "))
}

// MustLookup is Lookup for names known at compile time; it panics on an unknown name.
func MustLookup(name string) *Kind {
	k, err := Lookup(name)
	if err != nil {
		panic(err)
	}
	return k
}

// Unwrap returns the resource inside o and its kind; it returns nil, nil for
// an empty envelope.
func Unwrap(o *roostv1.Object) (Resource, *Kind) {
	if o == nil || o.Kind == nil {
		return nil, nil
	}
	var r Resource
	switch v := o.Kind.(type) {
	case *roostv1.Object_Server:
		r = v.Server
	case *roostv1.Object_Machine:
		r = v.Machine
	case *roostv1.Object_Pool:
		r = v.Pool
	case *roostv1.Object_Cluster:
		r = v.Cluster
	case *roostv1.Object_MachineClass:
		r = v.MachineClass
	case *roostv1.Object_NetworkProfile:
		r = v.NetworkProfile
	case *roostv1.Object_MaintenanceWindow:
		r = v.MaintenanceWindow
	case *roostv1.Object_ImageRelease:
		r = v.ImageRelease
	case *roostv1.Object_EnrollmentToken:
		r = v.EnrollmentToken
	case *roostv1.Object_Lease:
		r = v.Lease
	case *roostv1.Object_Revision:
		r = v.Revision
	case *roostv1.Object_Extension:
		r = v.Extension
	case *roostv1.Object_Event:
		r = v.Event
	case *roostv1.Object_ReleaseFeed:
		r = v.ReleaseFeed
	case *roostv1.Object_Channel:
		r = v.Channel
	default:
		return nil, nil
	}
	return r, KindOf(r)
}

// KindOf returns the kind of a resource message by its Go type.
func KindOf(r Resource) *Kind {
	name := string(r.ProtoReflect().Descriptor().Name())
	return byAlias[strings.ToLower(name)]
}

// Wrap puts any resource into an Object envelope.
func Wrap(r Resource) *roostv1.Object { return KindOf(r).Wrap(r) }

// NameOf returns the metadata name of the resource inside o ("" when empty).
func NameOf(o *roostv1.Object) string {
	r, _ := Unwrap(o)
	if r == nil {
		return ""
	}
	return r.GetMetadata().GetName()
}
