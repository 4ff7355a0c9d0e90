package cli

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/roostfleet/roost/cli/printers"

	"github.com/spf13/cobra"

	"github.com/roostfleet/roost/internal/tlsconfig"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
	"github.com/roostfleet/roost/resource"
)

// Shell completion of object names. A Tab press asks the hub (the
// configured members, or --hub) for the names of the objects an argument or
// flag takes. It must answer at once or not at all: the calls are bounded
// by completionTimeout (or --timeout when shorter), read the reached
// member's state without asking the leader, and every error (no
// configuration, hub unreachable, refused) yields no completions. File
// names are never offered for these arguments.

// completionTimeout bounds the hub calls of one completion.
const completionTimeout = 2 * time.Second

// lister returns the candidates for one argument or flag; args are the
// arguments before it.
type lister func(ctx context.Context, hub roostv1.HubServiceClient, args []string) ([]cobra.Completion, error)

// completeFromHub runs list against the hub within completionTimeout and
// returns its candidates that start with toComplete, or none on any error.
func (o *options) completeFromHub(cmd *cobra.Command, args []string, toComplete string, list lister) []cobra.Completion {
	// Nothing may reach the terminal while the shell completes.
	verbose := o.verbose
	o.verbose = false
	defer func() { o.verbose = verbose }()

	parent := context.Background()
	if cmd != nil && cmd.Context() != nil {
		parent = cmd.Context()
	}
	timeout := completionTimeout
	if o.timeout > 0 && o.timeout < timeout {
		timeout = o.timeout
	}
	ctx, conn, done, err := o.openWithin(parent, timeout)
	if err != nil {
		return nil
	}
	defer done()
	all, err := list(ctx, conn.hub, args)
	if err != nil {
		return nil
	}
	var out []cobra.Completion
	for _, c := range all {
		if name, _, _ := strings.Cut(c, "\t"); strings.HasPrefix(name, toComplete) {
			out = append(out, c)
		}
	}
	return out
}

// objectNames lists the names of the objects of kind (a kind name from
// resource.Kinds, e.g. "Pool").
func objectNames(kind string) lister {
	return func(ctx context.Context, hub roostv1.HubServiceClient, _ []string) ([]cobra.Completion, error) {
		resp, err := hub.List(ctx, &roostv1.ListRequest{Kind: kind, Consistency: roostv1.Consistency_CONSISTENCY_STALE})
		if err != nil {
			return nil, err
		}
		out := make([]cobra.Completion, 0, len(resp.GetObjects()))
		for _, obj := range resp.GetObjects() {
			out = append(out, resource.NameOf(obj))
		}
		return out, nil
	}
}

// objectRefs lists "kind/name" of the Pools, Machines and Servers, the
// objects Events are mostly about (get events --for).
func objectRefs(ctx context.Context, hub roostv1.HubServiceClient, args []string) ([]cobra.Completion, error) {
	var out []cobra.Completion
	for _, kind := range []string{"Pool", "Machine", "Server"} {
		names, err := objectNames(kind)(ctx, hub, args)
		if err != nil {
			return nil, err
		}
		for _, n := range names {
			out = append(out, strings.ToLower(kind)+"/"+n)
		}
	}
	return out, nil
}

// activeTokenNames lists the enrollment tokens that can still enroll
// (resource.TokenState Active), with their pool as description: revoking
// a revoked, expired or used-up token changes nothing.
func activeTokenNames(ctx context.Context, hub roostv1.HubServiceClient, _ []string) ([]cobra.Completion, error) {
	resp, err := hub.List(ctx, &roostv1.ListRequest{Kind: "EnrollmentToken", Consistency: roostv1.Consistency_CONSISTENCY_STALE})
	if err != nil {
		return nil, err
	}
	var out []cobra.Completion
	now := time.Now()
	for _, obj := range resp.GetObjects() {
		t := obj.GetEnrollmentToken()
		if resource.TokenState(t, now) != "Active" {
			continue
		}
		desc := ""
		if p := t.GetSpec().GetPool(); p != "" {
			desc = "pool " + p
		}
		out = append(out, cobra.CompletionWithDesc(t.GetMetadata().GetName(), desc))
	}
	return out, nil
}

// activeJoinTokenIDs lists the IDs of the join tokens that can still add
// a member, with their expiry as description.
func activeJoinTokenIDs(ctx context.Context, hub roostv1.HubServiceClient, _ []string) ([]cobra.Completion, error) {
	resp, err := hub.ListJoinTokens(ctx, &roostv1.ListJoinTokensRequest{})
	if err != nil {
		return nil, err
	}
	var out []cobra.Completion
	for _, t := range resp.GetTokens() {
		if t.GetStatus() == "Active" {
			out = append(out, cobra.CompletionWithDesc(t.GetId(), "expires "+printers.UntilCell(t.GetExpiresAt(), time.Now())))
		}
	}
	return out, nil
}

// kindArgNames lists the names of the objects of the kind given as the
// first argument (get, describe, delete); nothing for an unknown kind.
func kindArgNames(ctx context.Context, hub roostv1.HubServiceClient, args []string) ([]cobra.Completion, error) {
	k, err := resource.Lookup(args[0])
	if err != nil {
		return nil, err
	}
	return objectNames(k.Name)(ctx, hub, args)
}

// releaseVersions lists the versions of the ImageReleases, with their
// channels as descriptions.
func releaseVersions(ctx context.Context, hub roostv1.HubServiceClient, _ []string) ([]cobra.Completion, error) {
	resp, err := hub.List(ctx, &roostv1.ListRequest{Kind: "ImageRelease", Consistency: roostv1.Consistency_CONSISTENCY_STALE})
	if err != nil {
		return nil, err
	}
	var out []cobra.Completion
	for _, obj := range resp.GetObjects() {
		spec := obj.GetImageRelease().GetSpec()
		if spec.GetVersion() == "" {
			continue
		}
		if chans := spec.GetChannels(); len(chans) > 0 {
			out = append(out, cobra.CompletionWithDesc(spec.GetVersion(), strings.Join(chans, ", ")))
		} else {
			out = append(out, spec.GetVersion())
		}
	}
	return out, nil
}

// poolServers lists the Servers claimed by Machines of the pool given as
// the first argument (pool unassign).
func poolServers(ctx context.Context, hub roostv1.HubServiceClient, args []string) ([]cobra.Completion, error) {
	pool := trimKindPrefix(args[0], "pool/", "pools/")
	resp, err := hub.List(ctx, &roostv1.ListRequest{Kind: "Machine", Consistency: roostv1.Consistency_CONSISTENCY_STALE})
	if err != nil {
		return nil, err
	}
	var out []cobra.Completion
	for _, obj := range resp.GetObjects() {
		spec := obj.GetMachine().GetSpec()
		if spec.GetPool() == pool && spec.GetServer() != "" {
			out = append(out, cobra.CompletionWithDesc(spec.GetServer(), "machine "+resource.NameOf(obj)))
		}
	}
	return out, nil
}

// memberIDs lists the hub's members, with their API address as the
// description.
func memberIDs(ctx context.Context, hub roostv1.HubServiceClient, _ []string) ([]cobra.Completion, error) {
	resp, err := hub.ListMembers(ctx, &roostv1.ListMembersRequest{})
	if err != nil {
		return nil, err
	}
	var out []cobra.Completion
	for _, m := range resp.GetMembers() {
		desc := m.GetApiAddress()
		if m.GetLeader() {
			desc += " (leader)"
		}
		out = append(out, cobra.CompletionWithDesc(m.GetId(), strings.TrimSpace(desc)))
	}
	return out, nil
}

// trustedKeyIDs lists the IDs of the trusted release keys.
func trustedKeyIDs(ctx context.Context, hub roostv1.HubServiceClient, _ []string) ([]cobra.Completion, error) {
	resp, err := hub.ListTrustedKeys(ctx, &roostv1.ListTrustedKeysRequest{})
	if err != nil {
		return nil, err
	}
	var out []cobra.Completion
	for _, k := range resp.GetKeys() {
		out = append(out, cobra.CompletionWithDesc(k.GetId(), k.GetComment()))
	}
	return out, nil
}

// argCompletions completes positional arguments: the i-th with lists[i];
// with repeat, every argument after the last list's position too (NAME...),
// leaving out the names already given. Beyond them nothing is offered.
func (o *options) argCompletions(repeat bool, lists ...lister) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		i := len(args)
		if i >= len(lists) {
			if !repeat || len(lists) == 0 {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			i = len(lists) - 1
		}
		comps := o.completeFromHub(cmd, args, toComplete, lists[i])
		if repeat && i == len(lists)-1 {
			given := args[len(lists)-1:]
			comps = slices.DeleteFunc(comps, func(c cobra.Completion) bool {
				name, _, _ := strings.Cut(c, "\t")
				return slices.Contains(given, name)
			})
		}
		return comps, cobra.ShellCompDirectiveNoFileComp
	}
}

// flagCompletions completes a flag's value with list.
func (o *options) flagCompletions(list lister) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		return o.completeFromHub(cmd, args, toComplete, list), cobra.ShellCompDirectiveNoFileComp
	}
}

// kindAndNameCompletions completes KIND NAME... (get, delete; describe
// with one NAME): the first argument with kinds, the next with the names
// of that kind's objects.
func (o *options) kindAndNameCompletions(oneName bool) cobra.CompletionFunc {
	names := o.argCompletions(!oneName, nil, kindArgNames)
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) == 0 {
			return kindCompletions(false)(cmd, args, toComplete)
		}
		return names(cmd, args, toComplete)
	}
}

// userNames lists the users' names with their roles.
func userNames(ctx context.Context, hub roostv1.HubServiceClient, _ []string) ([]cobra.Completion, error) {
	resp, err := hub.ListUsers(ctx, &roostv1.ListUsersRequest{})
	if err != nil {
		return nil, err
	}
	var out []cobra.Completion
	for _, u := range resp.GetUsers() {
		out = append(out, cobra.CompletionWithDesc(u.GetName(), tlsconfig.RoleName(u.GetRole())))
	}
	return out, nil
}
