package cli

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/roostfleet/roost/apierror"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
	"github.com/roostfleet/roost/resource"
)

func newClusterCommand(o *options) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "cluster",
		Aliases: []string{"clusters", "cl"},
		Short:   "Give the hub credentials for a Kubernetes cluster",
		Long: `A Cluster is a tenant Kubernetes cluster that the workers of its Pools
join. Create and change Clusters with 'roostctl apply -f cluster.yaml'
(API endpoint, CA bundle, Kubernetes version, join settings, drain
timeout); list them with 'roostctl get clusters'.

The hub needs its own credentials for each Cluster: it creates a
short-lived bootstrap token for every joining worker, watches the workers'
Nodes and drains them before reboots. Store them with
'roostctl cluster set-credentials'.`,
		Example: `  roostctl apply -f cluster.yaml
  roostctl cluster set-credentials prod --kubeconfig roost-hub.kubeconfig
  roostctl get clusters -o wide`,
		Args: unknownSubcommand,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newClusterSetCredentialsCommand(o))
	return cmd
}

const setCredentialsLong = `Store the hub's credentials for a Cluster: a kubeconfig whose context the
hub uses to reach the cluster's API server. With them the hub

  - creates a short-lived bootstrap token for each joining worker (a Secret
    kube-system/bootstrap-token-<id>, the kubeadm way) and deletes it once
    the worker's Node has registered or the token has expired
  - creates the ClusterRoleBindings that let bootstrap tokens request and
    get kubelet client certificates, as kubeadm does
  - follows each worker's Node (providerID roost://<server>): the Machine's
    Joined and Ready milestones, the NODES column of 'roostctl get clusters'
  - cordons and drains a worker before its reboot, through the Eviction API,
    which honours PodDisruptionBudgets; while the cluster is unreachable no
    worker of it is rebooted

roostctl reads FILE ("-" for standard input), keeps only its current
context (or --context CTX) with that context's cluster and user, inlines
the certificate, key and token files they name (the hub cannot read your
files), checks the result and stores it in the Cluster's spec.kubeconfig
through the same all-or-nothing apply as 'roostctl apply'. The rest of the
Cluster stays as it is. Nothing is sent when the kubeconfig has a problem.
The apply carries the Cluster's metadata.modifyIndex as read, so a change
made in between (another apply) is not overwritten: roostctl then reads the
Cluster again and retries, up to 3 times in all, before it fails.

The credentials are write-only: no read returns them. 'roostctl get
clusters -o wide' shows CREDENTIALS <set>, and REACHABLE says whether they
work. Applying the Cluster's manifest without spec.kubeconfig keeps them;
run this command again to replace them.

The context's user needs these permissions (as a ServiceAccount, ClusterRole
and Role: examples/kubernetes/roost-hub-rbac.yaml, docs/operations.md):

  nodes                                    get, list, watch, patch, delete
  pods                                     get, list
  pods/eviction                            create
  daemonsets (apps)                        get
  poddisruptionbudgets (policy)            get, list
  clusterrolebindings                      get, create, update, delete
  clusterroles system:node-bootstrapper,   bind
    …:certificatesigningrequests:nodeclient and …:selfnodeclient
  secrets in kube-system                   get, list, create, update, delete

Give the hub a dedicated identity: a ServiceAccount token or a client
certificate. Users that get their credentials from an exec plugin (for
example 'aws eks get-token') are refused: the plugin would run as a command
on every hub member.

Exit codes: 0 stored (or unchanged), 1 the hub refused (e.g. no such
Cluster, or it kept changing concurrently), 2 the kubeconfig or the
arguments have a problem, 3 hub unreachable.`

const setCredentialsExample = `  # Use the current context of a kubeconfig made for the hub
  roostctl cluster set-credentials prod --kubeconfig roost-hub.kubeconfig

  # Pick a context from your own kubeconfig (its files are inlined)
  roostctl cluster set-credentials prod --kubeconfig ~/.kube/config --context roost-hub@prod

  # From standard input, checked by the hub but not stored
  kubectl config view --raw --minify | roostctl cluster set-credentials prod --kubeconfig - --dry-run`

func newClusterSetCredentialsCommand(o *options) *cobra.Command {
	var (
		file, context string
		dryRun        bool
	)
	cmd := &cobra.Command{
		Use:               "set-credentials NAME --kubeconfig FILE [--context CTX]",
		Short:             "Store the hub's kubeconfig for a Cluster (write-only)",
		Long:              setCredentialsLong,
		Example:           setCredentialsExample,
		Args:              exactArgs(1, "a cluster NAME"),
		ValidArgsFunction: o.argCompletions(false, objectNames("Cluster")),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := trimKindPrefix(args[0], "cluster/", "clusters/", "cl/")
			if err := checkNameArg("the cluster NAME", name); err != nil {
				return err
			}
			kubeconfig, err := o.readKubeconfig(file, context)
			if err != nil {
				return err
			}
			return o.setClusterCredentials(cmd, name, kubeconfig, dryRun)
		},
	}
	f := cmd.Flags()
	f.StringVar(&file, "kubeconfig", "", "kubeconfig `FILE` with the hub's credentials, or - for standard input")
	f.StringVar(&context, "context", "", "the kubeconfig's context to use (`CTX`; default: its current-context)")
	f.BoolVar(&dryRun, "dry-run", false, "let the hub check the Cluster with the new credentials without storing them")
	_ = cmd.MarkFlagRequired("kubeconfig")
	_ = cmd.MarkFlagFilename("kubeconfig")
	return cmd
}

// maxKubeconfigInput bounds what set-credentials reads: a kubeconfig with
// many contexts may be larger than the stored one, which holds one.
const maxKubeconfigInput = 4 << 20

// readKubeconfig reads the kubeconfig at path ("-": standard input) and
// returns it reduced to one context (ctxName, else its current context)
// with that context's files inlined, checked with resource.CheckKubeconfig.
// Every problem is a usage error that names the file; none repeats a
// secret.
func (o *options) readKubeconfig(path, ctxName string) ([]byte, error) {
	if path == "" {
		return nil, usageErrorf("--kubeconfig: empty file name; give the kubeconfig FILE, or - for standard input")
	}
	source := path
	var (
		data []byte
		err  error
	)
	if path == "-" {
		source = stdinSource
		data, err = io.ReadAll(io.LimitReader(o.In, maxKubeconfigInput+1))
	} else {
		data, err = readLimited(path, maxKubeconfigInput+1)
	}
	if err != nil {
		return nil, usageErrorf("--kubeconfig: %s", pathError(err))
	}
	if len(data) > maxKubeconfigInput {
		return nil, usageErrorf("--kubeconfig %s: larger than %d MiB; is it a kubeconfig?", source, maxKubeconfigInput>>20)
	}
	bad := func(format string, a ...any) error {
		return usageErrorf("--kubeconfig %s: %s", source, fmt.Sprintf(format, a...))
	}
	cfg, err := clientcmd.Load(data)
	if err != nil {
		// CheckKubeconfig words the parse error without repeating values.
		return nil, kubeconfigError(source, "", resource.CheckKubeconfig(data))
	}
	if len(cfg.Contexts) == 0 {
		return nil, bad("holds no context: a kubeconfig names the hub's cluster and user in a context (kubectl config set-context)")
	}
	if ctxName == "" {
		ctxName = cfg.CurrentContext
		if ctxName == "" {
			return nil, bad("has no current-context; choose one with --context: %s", contextNames(cfg))
		}
		if cfg.Contexts[ctxName] == nil {
			return nil, bad("its current-context %q is not defined; choose one with --context: %s", ctxName, contextNames(cfg))
		}
	} else if cfg.Contexts[ctxName] == nil {
		return nil, bad("has no context %q; its contexts: %s", ctxName, contextNames(cfg))
	}
	cfg.CurrentContext = ctxName
	kctx := cfg.Contexts[ctxName]
	if c := kctx.Cluster; c != "" && cfg.Clusters[c] == nil {
		return nil, bad("context %q names cluster %q, which it does not define; its clusters: %s", ctxName, c, mapNames(cfg.Clusters))
	}
	if u := kctx.AuthInfo; u != "" && cfg.AuthInfos[u] == nil {
		return nil, bad("context %q names user %q, which it does not define; its users: %s", ctxName, u, mapNames(cfg.AuthInfos))
	}

	// Relative file names are relative to the kubeconfig, as for kubectl.
	origin := "."
	if path != "-" {
		origin = path
	}
	origin, err = filepath.Abs(origin)
	if err != nil {
		return nil, bad("%v", err)
	}
	if path == "-" {
		origin = filepath.Join(origin, "stdin") // base directory: the working directory
	}
	minifyKubeconfig(cfg, origin)
	if err := clientcmdapi.FlattenConfig(cfg); err != nil {
		return nil, bad("context %q: inlining its files: %s", ctxName, pathError(err))
	}
	for name, u := range cfg.AuthInfos {
		if u.TokenFile == "" {
			continue
		}
		p := clientcmdapi.ResolvePath(u.TokenFile, filepath.Dir(u.LocationOfOrigin))
		tok, err := readLimited(p, 64<<10)
		if err != nil {
			return nil, bad("user %q: reading its tokenFile: %s", name, pathError(err))
		}
		if u.Token != "" {
			return nil, bad("user %q has both token and tokenFile; remove one", name)
		}
		u.Token, u.TokenFile = strings.TrimSpace(string(tok)), ""
	}
	out, err := clientcmd.Write(*cfg)
	if err != nil {
		return nil, bad("writing the reduced kubeconfig: %v", err)
	}
	if vs := resource.CheckKubeconfig(out); len(vs) > 0 {
		return nil, kubeconfigError(source, ctxName, vs)
	}
	return out, nil
}

// minifyKubeconfig keeps only cfg's current context and the cluster and
// user it names (when they exist: CheckKubeconfig reports those that do
// not), and records origin as where every entry came from, so that
// FlattenConfig resolves relative file names against it.
func minifyKubeconfig(cfg *clientcmdapi.Config, origin string) {
	kctx := cfg.Contexts[cfg.CurrentContext]
	kctx.LocationOfOrigin = origin
	cfg.Contexts = map[string]*clientcmdapi.Context{cfg.CurrentContext: kctx}
	clusters, users := map[string]*clientcmdapi.Cluster{}, map[string]*clientcmdapi.AuthInfo{}
	if c := cfg.Clusters[kctx.Cluster]; c != nil {
		c.LocationOfOrigin = origin
		clusters[kctx.Cluster] = c
	}
	if u := cfg.AuthInfos[kctx.AuthInfo]; u != nil {
		u.LocationOfOrigin = origin
		users[kctx.AuthInfo] = u
	}
	cfg.Clusters, cfg.AuthInfos = clusters, users
}

// kubeconfigError reports violations of resource.CheckKubeconfig as one
// usage error about the file (and context).
func kubeconfigError(source, ctxName string, vs []apierror.Violation) error {
	where := "--kubeconfig " + source
	if ctxName != "" {
		where += fmt.Sprintf(" (context %q)", ctxName)
	}
	if len(vs) == 1 {
		return usageErrorf("%s: %s", where, violationText(vs[0]))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s has %d problems:", where, len(vs))
	for _, v := range vs {
		b.WriteString("\n  " + violationText(v))
	}
	return usageErrorf("%s", b.String())
}

// violationText is a violation without its field: the message and hint.
func violationText(v apierror.Violation) string {
	if v.Hint == "" {
		return v.Message
	}
	return v.Message + " (" + v.Hint + ")"
}

func contextNames(cfg *clientcmdapi.Config) string { return mapNames(cfg.Contexts) }

// mapNames lists the keys of m, quoted and sorted, or "none".
func mapNames[V any](m map[string]V) string {
	if len(m) == 0 {
		return "none"
	}
	var names []string
	for n := range m {
		names = append(names, fmt.Sprintf("%q", n))
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}

// readLimited reads at most limit bytes of the file at path.
func readLimited(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, limit))
}

// setCredentialsAttempts bounds set-credentials' read-modify-write when a
// concurrent change of the Cluster makes the hub refuse the apply with
// Aborted.
const setCredentialsAttempts = 3

// setClusterCredentials reads Cluster name, sets its spec.kubeconfig and
// applies it, keeping the rest of the spec, the labels and annotations. The
// apply carries the uid and modifyIndex it read as preconditions, so that a
// change made in between is not overwritten: on a conflict (Aborted) it
// reads the Cluster again and retries, up to setCredentialsAttempts times.
func (o *options) setClusterCredentials(cmd *cobra.Command, name string, kubeconfig []byte, dryRun bool) error {
	ctx, conn, done, err := o.open(cmd.Context())
	if err != nil {
		return err
	}
	defer done()
	for attempt := 1; ; attempt++ {
		resp, err := conn.hub.Get(ctx, &roostv1.GetRequest{Kind: "Cluster", Name: name, Consistency: roostv1.Consistency_CONSISTENCY_LINEARIZABLE})
		if err != nil {
			err = o.wrapCallError(err)
			if statusCode(err) == codes.NotFound {
				printError(o.Err, err)
				fmt.Fprintf(o.Err, "  create it first (roostctl apply -f cluster.yaml), then set its credentials\n")
				return reportedError{exitCode(err)}
			}
			return err
		}
		cur := resp.GetObject().GetCluster()
		if cur == nil {
			return fmt.Errorf("the hub answered the Get of Cluster %q with another kind", name)
		}
		// The object as its manifest would hold it: no status, of the
		// hub-set metadata only the preconditions (uid, modifyIndex); the
		// spec as stored plus the credentials.
		spec := proto.Clone(cur.GetSpec()).(*roostv1.ClusterSpec)
		if spec == nil {
			spec = &roostv1.ClusterSpec{}
		}
		spec.Kubeconfig = string(kubeconfig)
		md := cur.GetMetadata()
		obj := resource.Wrap(&roostv1.Cluster{ApiVersion: resource.APIVersion, Kind: "Cluster",
			Metadata: &roostv1.ObjectMeta{Name: md.GetName(), Labels: md.GetLabels(), Annotations: md.GetAnnotations(),
				Uid: md.GetUid(), ModifyIndex: md.GetModifyIndex()},
			Spec: spec})
		o.debugf("applying Cluster %q (modifyIndex %d) with new credentials (dry run: %t)", name, md.GetModifyIndex(), dryRun)
		ar, err := conn.hub.Apply(ctx, &roostv1.ApplyRequest{Objects: []*roostv1.Object{obj}, DryRun: dryRun})
		if err != nil {
			err = o.wrapCallError(err)
			if statusCode(err) == codes.Aborted && isHubError(err) {
				if attempt < setCredentialsAttempts {
					o.debugf("Cluster %q changed while setting its credentials (%v); reading it again", name, err)
					continue
				}
				// The hint about metadata.modifyIndex is for manifests.
				e := apierror.FromError(err)
				what := e.Message
				if len(e.Violations) == 1 {
					what = e.Violations[0].Message
				}
				fmt.Fprintf(o.Err, "Error from hub: cluster/%s: %s\n", name, strings.TrimPrefix(what, "cluster/"+name+": "))
				fmt.Fprintf(o.Err, "  the Cluster changed each time its credentials were about to be stored (%d attempts); nothing was stored: run the command again\n",
					setCredentialsAttempts)
				return reportedError{exitCodeOf(e.Code)}
			}
			return o.reportObjectError("cluster/"+name, err)
		}
		what := "set"
		if rs := ar.GetResults(); len(rs) == 1 && rs[0].GetAction() == "unchanged" {
			what = "unchanged"
		}
		suffix := ""
		if dryRun {
			suffix = " (dry run)"
		}
		fmt.Fprintf(o.Out, "cluster/%s credentials %s%s\n", name, what, suffix)
		return nil
	}
}

// reportObjectError prints a hub refusal of an apply of one object, with
// its violations' fields relative to the object ("spec.kubeconfig", not
// "objects[0].spec.kubeconfig").
func (o *options) reportObjectError(ref string, err error) error {
	if !isHubError(err) {
		return err
	}
	e := apierror.FromError(err)
	// Conflicts (Aborted) name the object already.
	fmt.Fprintf(o.Err, "Error from hub: %s: %s\n", ref, strings.TrimPrefix(e.Message, ref+": "))
	for _, v := range e.Violations {
		v.Field = strings.TrimPrefix(strings.TrimPrefix(v.Field, "objects[0]"), ".")
		fmt.Fprintf(o.Err, "  %s\n", v.String())
	}
	return reportedError{exitCodeOf(e.Code)}
}
