package kube

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/version"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// DefaultTimeout bounds each API request of a Client built with a zero
// timeout.
const DefaultTimeout = 30 * time.Second

// userAgent identifies the hub in the cluster's audit log.
const userAgent = "roost-hub"

// Client talks to one tenant cluster's kube-apiserver. It is safe for
// concurrent use.
type Client struct {
	config *rest.Config
	cs     kubernetes.Interface
}

// NewClient builds a Client from kubeconfig YAML (the current context is
// used, with its cluster's server, CA and the user's credentials). timeout
// bounds every API request (each HTTP round trip, including the server-side
// request timeout); zero means DefaultTimeout and a negative value is an
// error. The error says what is wrong with the kubeconfig: empty, not YAML,
// no current context, a context naming a missing cluster or user, a cluster
// without a server, and so on. NewClient does not contact the cluster; use
// Probe for that.
func NewClient(kubeconfig []byte, timeout time.Duration) (*Client, error) {
	if len(kubeconfig) == 0 {
		return nil, errors.New("kube: kubeconfig is empty")
	}
	if timeout < 0 {
		return nil, fmt.Errorf("kube: negative request timeout %v", timeout)
	}
	if timeout == 0 {
		timeout = DefaultTimeout
	}
	raw, err := clientcmd.Load(kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("kube: parsing kubeconfig: %w", err)
	}
	if err := checkCurrentContext(raw); err != nil {
		return nil, fmt.Errorf("kube: kubeconfig: %w", err)
	}
	cc := clientcmd.NewDefaultClientConfig(*raw, &clientcmd.ConfigOverrides{})
	// ConfirmUsable (of *clientcmd.DirectClientConfig) names what is wrong
	// with the current context (missing cluster or user, no server,
	// unreadable CA file); ClientConfig alone often says only "no
	// configuration has been provided".
	if u, ok := cc.(interface{ ConfirmUsable() error }); ok {
		if err := u.ConfirmUsable(); err != nil {
			return nil, fmt.Errorf("kube: kubeconfig: %w", err)
		}
	}
	cfg, err := cc.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kube: kubeconfig: %w", err)
	}
	cfg.Timeout = timeout
	// client-go's default (5 QPS, burst 10) is too slow for a drain of a
	// full Node; the hub still stays a light user of the cluster.
	cfg.QPS, cfg.Burst = 20, 40
	return NewClientForConfig(cfg)
}

// checkCurrentContext says what is missing for the current context to be
// usable, in the kubeconfig's own terms.
func checkCurrentContext(raw *clientcmdapi.Config) error {
	if raw.CurrentContext == "" {
		return errors.New("no current-context")
	}
	kctx, ok := raw.Contexts[raw.CurrentContext]
	if !ok {
		return fmt.Errorf("current-context %q is not among its contexts", raw.CurrentContext)
	}
	cluster, ok := raw.Clusters[kctx.Cluster]
	if !ok {
		return fmt.Errorf("context %q names cluster %q, which it does not define", raw.CurrentContext, kctx.Cluster)
	}
	if cluster.Server == "" {
		return fmt.Errorf("cluster %q has no server", kctx.Cluster)
	}
	if _, ok := raw.AuthInfos[kctx.AuthInfo]; kctx.AuthInfo != "" && !ok {
		return fmt.Errorf("context %q names user %q, which it does not define", raw.CurrentContext, kctx.AuthInfo)
	}
	return nil
}

// NewClientForConfig builds a Client from a client-go config, used as given
// (its Timeout, QPS and Burst included) apart from the user agent.
func NewClientForConfig(cfg *rest.Config) (*Client, error) {
	if cfg == nil {
		return nil, errors.New("kube: nil rest.Config")
	}
	cfg = rest.CopyConfig(cfg)
	if cfg.UserAgent == "" {
		cfg.UserAgent = userAgent
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kube: client for %s: %w", cfg.Host, err)
	}
	return &Client{config: cfg, cs: cs}, nil
}

// Host is the API server URL the Client talks to.
func (c *Client) Host() string { return c.config.Host }

// Clientset is the underlying client-go clientset, for callers that need an
// API this package does not wrap.
func (c *Client) Clientset() kubernetes.Interface { return c.cs }

// Probe asks the API server for its version (GET /version) and returns its
// git version, e.g. "v1.34.4". An error means the cluster is unreachable,
// refused the credentials or did not answer within the request timeout.
func (c *Client) Probe(ctx context.Context) (string, error) {
	raw, err := c.cs.Discovery().RESTClient().Get().AbsPath("/version").Do(ctx).Raw()
	if err != nil {
		return "", fmt.Errorf("kube: probing %s: %w", c.config.Host, err)
	}
	var info version.Info
	if err := json.Unmarshal(raw, &info); err != nil {
		return "", fmt.Errorf("kube: probing %s: decoding /version: %w", c.config.Host, err)
	}
	if info.GitVersion == "" {
		return "", fmt.Errorf("kube: probing %s: /version has no gitVersion", c.config.Host)
	}
	return info.GitVersion, nil
}
