package resource

import (
	"crypto/x509"
	"encoding/pem"
	"net/url"
	"regexp"
	"strings"

	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

var (
	bootstrapTokenRE = regexp.MustCompile(`^[a-z0-9]{6}\.[a-z0-9]{16}$`)
	kubeVersionRE    = regexp.MustCompile(`^v\d+\.\d+\.\d+([-+][0-9A-Za-z.+-]+)?$`)
)

// validateCluster: apiEndpoint is an https URL with a host; caBundle, when
// set, holds only PEM certificates that parse; bootstrapToken, when set,
// matches [a-z0-9]{6}.[a-z0-9]{16} (the token itself never appears in a
// message); kubernetesVersion, when set, looks like "v1.34.4".
func validateCluster(e *violations, s *roostv1.ClusterSpec) {
	const f = "spec.apiEndpoint"
	if ep := s.GetApiEndpoint(); ep == "" {
		e.add(f, "is required", `the cluster's API server URL, e.g. "https://10.0.0.1:6443"`)
	} else if u, err := url.Parse(ep); err != nil {
		e.addf(f, `e.g. "https://10.0.0.1:6443"`, "invalid URL %q: %v", ep, unwrapURLError(err))
	} else {
		switch {
		case u.Scheme != "https":
			e.addf(f, `e.g. "https://10.0.0.1:6443"`, "must be an https:// URL, got %q", ep)
		case u.Hostname() == "":
			e.addf(f, `e.g. "https://10.0.0.1:6443"`, "must name a host, got %q", ep)
		case u.User != nil:
			e.add(f, "must not hold credentials", "workers join with spec.bootstrapToken")
		case u.RawQuery != "" || u.Fragment != "":
			e.addf(f, "", "must not have a query or fragment, got %q", ep)
		}
	}
	if ca := s.GetCaBundle(); ca != "" {
		checkCABundle(e, "spec.caBundle", ca)
	}
	if t := s.GetBootstrapToken(); t != "" && !bootstrapTokenRE.MatchString(t) {
		e.add("spec.bootstrapToken", `must match [a-z0-9]{6}.[a-z0-9]{16}`,
			`a kubeadm token such as "abcdef.0123456789abcdef"; create one with "kubeadm token create"`)
	}
	if v := s.GetKubernetesVersion(); v != "" && !kubeVersionRE.MatchString(v) {
		e.addf("spec.kubernetesVersion", `e.g. "v1.34.4"`, "invalid version %q", v)
	}
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
