package resource

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net/netip"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/roostfleet/roost/apierror"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

var (
	kubeVersionRE = regexp.MustCompile(`^v\d+\.\d+\.\d+([-+][0-9A-Za-z.+-]+)?$`)
)

// Limits of a Cluster's spec.
const (
	// MaxKubeconfigBytes bounds spec.kubeconfig: one context with inline
	// certificates is a few KiB.
	MaxKubeconfigBytes = 64 << 10
	// MinBootstrapTokenTTL and MaxBootstrapTokenTTL bound
	// spec.join.bootstrapTokenTtl.
	MinBootstrapTokenTTL = time.Minute
	MaxBootstrapTokenTTL = 24 * time.Hour
	// MaxDrainTimeout bounds spec.drainTimeout.
	MaxDrainTimeout = time.Hour
)

// validateCluster: apiEndpoint is an https URL with a host; caBundle, when
// set, holds only PEM certificates that parse; kubernetesVersion, when set,
// looks like "v1.34.4"; kubeconfig, when set, passes CheckKubeconfig;
// join.bootstrapTokenTtl is from 1m to 24h, join.clusterDns are distinct IP
// addresses, join.clusterDomain is a DNS name; drainTimeout is > 0 and at
// most 1h. No message repeats a secret.
func validateCluster(e *violations, s *roostv1.ClusterSpec) {
	const f = "spec.apiEndpoint"
	if ep := s.GetApiEndpoint(); ep == "" {
		e.add(f, "is required", `the cluster's API server URL, e.g. "https://10.0.0.1:6443"`)
	} else if u, err := url.Parse(ep); err != nil {
		e.addf(f, `e.g. "https://10.0.0.1:6443"`, "invalid URL %q: %v", ep, unwrapURLError(err))
	} else {
		shown := u.Redacted() // never repeat a password
		switch {
		case u.Scheme != "https":
			e.addf(f, `e.g. "https://10.0.0.1:6443"`, "must be an https:// URL, got %q", shown)
		case u.Hostname() == "":
			e.addf(f, `e.g. "https://10.0.0.1:6443"`, "must name a host, got %q", shown)
		case u.User != nil:
			e.add(f, "must not hold credentials", "give the hub its credentials in spec.kubeconfig, e.g. with roostctl cluster set-credentials NAME --kubeconfig FILE")
		case u.RawQuery != "" || u.Fragment != "":
			e.addf(f, "", "must not have a query or fragment, got %q", shown)
		}
	}
	if ca := s.GetCaBundle(); ca != "" {
		checkCABundle(e, "spec.caBundle", ca)
	}
	if v := s.GetKubernetesVersion(); v != "" && !kubeVersionRE.MatchString(v) {
		e.addf("spec.kubernetesVersion", `e.g. "v1.34.4"`, "invalid version %q", v)
	}
	if kc := s.GetKubeconfig(); kc != "" {
		e.list = append(e.list, CheckKubeconfig([]byte(kc))...)
	}
	validateClusterJoin(e, s.GetJoin())
	checkDurationRange(e, "spec.drainTimeout", s.GetDrainTimeout(), 0, MaxDrainTimeout,
		`how long the hub may cordon and drain a worker before its reboot; the default is "5m"`)
}

func validateClusterJoin(e *violations, j *roostv1.ClusterJoin) {
	if j == nil {
		return
	}
	checkDurationRange(e, "spec.join.bootstrapTokenTtl", j.GetBootstrapTokenTtl(), MinBootstrapTokenTTL, MaxBootstrapTokenTTL,
		`the lifetime of each worker's bootstrap token; the default is "1h"`)
	seen := map[netip.Addr]int{}
	for i, s := range j.GetClusterDns() {
		f := fmt.Sprintf("spec.join.clusterDns[%d]", i)
		ip, err := netip.ParseAddr(s)
		switch {
		case s == "":
			e.add(f, "is empty", `the cluster DNS service IP, e.g. "10.96.0.10"`)
			continue
		case err != nil || ip.Zone() != "":
			e.addf(f, `the cluster DNS Service IP as "kubectl -n kube-system get service kube-dns" shows it, e.g. "10.96.0.10"`, "invalid IP address %q", s)
			continue
		}
		if prev, dup := seen[ip.Unmap()]; dup {
			e.addf(f, "", "%s is listed twice (also at index %d)", s, prev)
			continue
		}
		seen[ip.Unmap()] = i
	}
	if d := j.GetClusterDomain(); d != "" {
		const hint = `the cluster's DNS domain; the default is "cluster.local"`
		switch {
		case strings.HasSuffix(d, "."):
			e.addf("spec.join.clusterDomain", hint, "must not end with a dot, got %q", d)
		default:
			if msgs := validation.IsDNS1123Subdomain(d); len(msgs) > 0 {
				e.addf("spec.join.clusterDomain", hint, "invalid DNS name %q: %s", d, strings.Join(msgs, "; "))
			}
		}
	}
}

// checkDurationRange checks that a set duration is valid, > 0 and from
// min to max.
func checkDurationRange(e *violations, field string, d *durationpb.Duration, min, max time.Duration, hint string) {
	if d == nil {
		return
	}
	if err := d.CheckValid(); err != nil {
		e.addf(field, hint, "invalid duration: %v", err)
		return
	}
	switch v := d.AsDuration(); {
	case v <= 0:
		e.addf(field, hint, "must be > 0, got %s", durationText(v))
	case v < min:
		e.addf(field, hint, "must be at least %s, got %s", durationText(min), durationText(v))
	case v > max:
		e.addf(field, hint, "must be at most %s, got %s", durationText(max), durationText(v))
	}
}

// durationText writes d as manifests do: "1h", "90s", "-5m".
func durationText(d time.Duration) string { return FormatDuration(durationpb.New(d)) }

// CheckKubeconfig checks a Cluster's spec.kubeconfig, the hub's
// credentials for the cluster: at most MaxKubeconfigBytes; it parses with
// clientcmd.Load; its current context exists and names a cluster with an
// https server URL and a user with a credential the hub can use on its
// own — a client certificate and key, or a bearer token (exec plugins are
// refused: they would run commands on the hub) —
// with every certificate and key inline (the hub cannot read files named
// by a kubeconfig written on another machine). Violations name the field
// "spec.kubeconfig" and never repeat a secret (tokens, keys, certificate
// data); names of contexts, clusters and users are not secret.
func CheckKubeconfig(data []byte) []apierror.Violation {
	var e violations
	checkKubeconfig(&e, data)
	return e.list
}

func checkKubeconfig(e *violations, data []byte) {
	const f = "spec.kubeconfig"
	if len(data) > MaxKubeconfigBytes {
		e.addf(f, "keep only the context the hub uses: roostctl cluster set-credentials NAME --kubeconfig FILE --context CTX",
			"is %d bytes, more than the limit of %d (64 KiB)", len(data), MaxKubeconfigBytes)
		return
	}
	if strings.TrimSpace(string(data)) == "" {
		e.add(f, "is empty", "leave it out to keep the stored credentials, or give a kubeconfig")
		return
	}
	cfg, err := clientcmd.Load(data)
	if err != nil {
		e.addf(f, "give a kubeconfig as kubectl reads it",
			"does not parse as a kubeconfig: %s", kubeconfigParseProblem(err, data))
		return
	}
	ctxName := cfg.CurrentContext
	if ctxName == "" {
		e.addf(f, "set current-context, or pick a context with roostctl cluster set-credentials NAME --kubeconfig FILE --context CTX",
			"has no current-context (contexts: %s)", nameList(cfg.Contexts))
		return
	}
	kctx := cfg.Contexts[ctxName]
	if kctx == nil {
		e.addf(f, "add the context, or pick another with roostctl cluster set-credentials NAME --kubeconfig FILE --context CTX",
			"current context %q is not defined (contexts: %s)", ctxName, nameList(cfg.Contexts))
		return
	}
	switch cl := cfg.Clusters[kctx.Cluster]; {
	case kctx.Cluster == "":
		e.addf(f, "set the context's cluster", "current context %q names no cluster", ctxName)
	case cl == nil:
		e.addf(f, "add the cluster, or fix the context's cluster", "current context %q names cluster %q, which is not defined (clusters: %s)",
			ctxName, kctx.Cluster, nameList(cfg.Clusters))
	default:
		checkKubeconfigCluster(e, kctx.Cluster, cl)
	}
	switch u := cfg.AuthInfos[kctx.AuthInfo]; {
	case kctx.AuthInfo == "":
		e.addf(f, "set the context's user: the hub needs credentials", "current context %q names no user", ctxName)
	case u == nil:
		e.addf(f, "add the user, or fix the context's user", "current context %q names user %q, which is not defined (users: %s)",
			ctxName, kctx.AuthInfo, nameList(cfg.AuthInfos))
	default:
		checkKubeconfigUser(e, kctx.AuthInfo, u)
	}
}

func checkKubeconfigCluster(e *violations, name string, cl *clientcmdapi.Cluster) {
	const f = "spec.kubeconfig"
	switch u, err := url.Parse(cl.Server); {
	case cl.Server == "":
		e.addf(f, `set its server, the API server URL, e.g. "https://10.0.0.1:6443"`, "cluster %q has no server URL", name)
	case err != nil:
		e.addf(f, `e.g. "https://10.0.0.1:6443"`, "cluster %q: invalid server URL: %v", name, unwrapURLError(err))
	case u.Scheme != "https" || u.Hostname() == "":
		e.addf(f, `e.g. "https://10.0.0.1:6443"`, "cluster %q: server must be an https:// URL with a host, got %q", name, u.Redacted())
	}
	if cl.CertificateAuthority != "" {
		e.addf(f, "inline it as certificate-authority-data, or let roostctl cluster set-credentials NAME --kubeconfig FILE do it",
			"cluster %q refers to the file certificate-authority %q, which the hub cannot read", name, cl.CertificateAuthority)
	}
	if len(cl.CertificateAuthorityData) > 0 {
		var v violations
		checkCABundle(&v, f, string(cl.CertificateAuthorityData))
		for _, x := range v.list {
			e.addf(f, "", "cluster %q: certificate-authority-data %s", name, x.Message)
		}
	}
}

func checkKubeconfigUser(e *violations, name string, u *clientcmdapi.AuthInfo) {
	const f = "spec.kubeconfig"
	files := []struct{ key, path, inline string }{
		{"client-certificate", u.ClientCertificate, "client-certificate-data"},
		{"client-key", u.ClientKey, "client-key-data"},
		{"tokenFile", u.TokenFile, "token"},
	}
	for _, x := range files {
		if x.path != "" {
			e.addf(f, "inline it as "+x.inline+", or let roostctl cluster set-credentials NAME --kubeconfig FILE do it",
				"user %q refers to the file %s %q, which the hub cannot read", name, x.key, x.path)
		}
	}
	if u.Username != "" || u.Password != "" {
		e.addf(f, "use a client certificate or a token", "user %q uses basic authentication (username/password), which Kubernetes no longer supports", name)
	}
	if u.AuthProvider != nil {
		e.addf(f, "use a client certificate or a token (e.g. a ServiceAccount token)",
			"user %q uses the auth-provider %q, which the hub does not support", name, u.AuthProvider.Name)
	}
	hasCert, hasKey := len(u.ClientCertificateData) > 0, len(u.ClientKeyData) > 0
	switch {
	case u.ClientCertificate != "" || u.ClientKey != "":
		// Reported above: the pair is checked once both are inline.
	case hasCert && !hasKey:
		e.addf(f, "add client-key-data, the certificate's private key", "user %q has a client certificate but no key", name)
	case hasKey && !hasCert:
		e.addf(f, "add client-certificate-data", "user %q has a client key but no certificate", name)
	case hasCert && hasKey:
		if _, err := tls.X509KeyPair(u.ClientCertificateData, u.ClientKeyData); err != nil {
			e.addf(f, "give the PEM certificate and its private key, as kubectl config view --raw shows them",
				"user %q: client-certificate-data and client-key-data are not a usable key pair: %s", name, keyPairProblem(err))
		}
	}
	if u.Exec != nil {
		e.addf(f, "give the hub a ServiceAccount token or a client certificate instead (see docs/operations.md, Connecting a cluster)",
			"user %q uses an exec credential plugin, which would run a command on every hub member; the hub refuses it", name)
	}
	tried := hasCert || hasKey || u.Token != "" || u.Exec != nil || u.AuthProvider != nil ||
		u.ClientCertificate != "" || u.ClientKey != "" || u.TokenFile != "" || u.Username != "" || u.Password != ""
	if !tried {
		e.addf(f, "give the user a client certificate and key, or a token",
			"user %q has no credentials", name)
	}
}

// keyPairProblem describes a tls.X509KeyPair error without the data.
func keyPairProblem(err error) string {
	msg := err.Error()
	switch {
	case strings.Contains(msg, "private key does not match public key"):
		return "the key does not belong to the certificate"
	case strings.Contains(msg, "failed to find any PEM data in certificate input"):
		return "the certificate is not PEM"
	case strings.Contains(msg, "failed to find any PEM data in key input"), strings.Contains(msg, "failed to find PEM block with type ending in \"PRIVATE KEY\""):
		return "the key is not a PEM private key"
	case strings.Contains(msg, "failed to parse private key"):
		return "the key does not parse"
	}
	return strings.TrimPrefix(msg, "tls: ")
}

var jsonTypeErrorRE = regexp.MustCompile(`^json: cannot unmarshal (\w+) into Go struct field \w+\.(\S+) of type (\S+)$`)

// kubeconfigParseProblem describes a clientcmd.Load error in the words of
// a kubeconfig, and never with a value from data: YAML errors may quote
// the values they stumble on, and a value may be a secret.
func kubeconfigParseProblem(err error, data []byte) string {
	msg := strings.Join(strings.Fields(err.Error()), " ")
	switch {
	case strings.Contains(msg, "couldn't get version/kind"):
		return "it is not a YAML mapping"
	case strings.Contains(msg, "illegal base64 data"):
		return "a *-data field (certificate-authority-data, client-certificate-data, client-key-data) is not base64"
	case strings.HasPrefix(msg, "no kind "):
		msg, _, _ = strings.Cut(msg, " in scheme ")
		return msg + `; a kubeconfig has kind "Config"`
	}
	if m := jsonTypeErrorRE.FindStringSubmatch(msg); m != nil {
		return fmt.Sprintf("%s: want %s, got %s", m[2], jsonTypeWord(m[3]), jsonTypeWord(m[1]))
	}
	return scrubQuoted(msg, data)
}

// jsonTypeWord names a JSON or Go type for a message.
func jsonTypeWord(t string) string {
	switch {
	case t == "string":
		return "a string"
	case t == "number" || strings.HasPrefix(t, "int") || strings.HasPrefix(t, "uint"):
		return "a number"
	case t == "bool":
		return "true or false"
	case t == "array" || strings.HasPrefix(t, "[]"):
		return "a list"
	}
	return "a mapping"
}

// scrubQuoted replaces every quoted part of msg that occurs in data and is
// not a kubeconfig key with "…".
func scrubQuoted(msg string, data []byte) string {
	var b strings.Builder
	for {
		i := strings.IndexAny(msg, "`\"'")
		if i < 0 {
			b.WriteString(msg)
			break
		}
		q := msg[i]
		j := strings.IndexByte(msg[i+1:], q)
		if j < 0 {
			b.WriteString(msg)
			break
		}
		part := msg[i+1 : i+1+j]
		b.WriteString(msg[:i+1])
		if len(part) > 3 && strings.Contains(string(data), strings.TrimSuffix(part, "...")) && !isKubeconfigKey(part) {
			b.WriteString("…")
		} else {
			b.WriteString(part)
		}
		b.WriteByte(q)
		msg = msg[i+2+j:]
	}
	return b.String()
}

// kubeconfigKeys are the field names of a kubeconfig, which parse errors
// may quote.
var kubeconfigKeys = []string{"apiVersion", "kind", "clusters", "cluster", "contexts", "context", "users", "user", "name",
	"current-context", "preferences", "extensions", "server", "certificate-authority", "certificate-authority-data",
	"insecure-skip-tls-verify", "tls-server-name", "proxy-url", "client-certificate", "client-certificate-data",
	"client-key", "client-key-data", "token", "tokenFile", "exec", "command", "args", "env", "namespace"}

func isKubeconfigKey(s string) bool { return slices.Contains(kubeconfigKeys, s) }

// nameList lists the keys of m for messages: `"a", "b"`, or "none".
func nameList[V any](m map[string]V) string {
	if len(m) == 0 {
		return "none"
	}
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, fmt.Sprintf("%q", k))
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}

func unwrapURLError(err error) error {
	if ue, ok := err.(*url.Error); ok {
		return ue.Err
	}
	return err
}

// checkCABundle checks that ca is one or more PEM CERTIFICATE blocks that
// parse as X.509, and nothing else.
func checkCABundle(e *violations, field, ca string) {
	const hint = "paste the cluster's CA certificate(s), -----BEGIN CERTIFICATE----- … -----END CERTIFICATE-----"
	rest := []byte(ca)
	n := 0
	for {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		n++
		if block.Type != "CERTIFICATE" {
			e.addf(field, hint, "PEM block %d is a %q, not a CERTIFICATE", n, block.Type)
			return
		}
		if _, err := x509.ParseCertificate(block.Bytes); err != nil {
			e.addf(field, hint, "certificate %d does not parse: %v", n, err)
			return
		}
	}
	switch {
	case n == 0:
		e.add(field, "holds no PEM certificate", hint)
	case strings.TrimSpace(string(rest)) != "":
		e.add(field, "has data after the last PEM certificate", hint)
	}
}
