package kube

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	bootstrapapi "k8s.io/cluster-bootstrap/token/api"
	bootstraputil "k8s.io/cluster-bootstrap/token/util"
)

// ManagedByLabel and ManagedByValue mark the objects the hub creates in a
// tenant cluster (bootstrap token Secrets, the bootstrap ClusterRoleBindings
// it created).
const (
	ManagedByLabel = "app.kubernetes.io/managed-by"
	ManagedByValue = "roost-hub"
)

// Token is a bootstrap token the hub created: Secret
// kube-system/bootstrap-token-<ID>. The secret half is not returned.
type Token struct {
	ID          string    // 6 characters [a-z0-9]
	Expires     time.Time // when the API server stops accepting it; zero if it never expires
	Description string
}

// GenerateToken returns a new random bootstrap token, split into its public
// id (6 characters [a-z0-9]) and its secret (16 characters); the token a
// kubelet presents is "<id>.<secret>".
func GenerateToken() (id, secret string, err error) {
	tok, err := bootstraputil.GenerateBootstrapToken()
	if err != nil {
		return "", "", fmt.Errorf("kube: generating bootstrap token: %w", err)
	}
	m := bootstraputil.BootstrapTokenRegexp.FindStringSubmatch(tok)
	if len(m) != 3 {
		return "", "", fmt.Errorf("kube: generated bootstrap token has an unexpected form")
	}
	return m[1], m[2], nil
}

// CreateBootstrapToken stores the bootstrap token "<id>.<secret>" the way
// kubeadm does, so the API server authenticates it as user
// system:bootstrap:<id> in groups system:bootstrappers and
// BootstrapTokenGroup until expires (stored in UTC, RFC 3339, to the
// second): Secret kube-system/bootstrap-token-<id> of type
// bootstrap.kubernetes.io/token with usages authentication and signing,
// labelled ManagedByLabel=ManagedByValue. expires must be set (a token that
// never expires is refused); one in the past makes a token the API server
// refuses. Creating a token that exists and is the hub's replaces it
// (retries are safe); one that exists and is not the hub's is an error.
func (c *Client) CreateBootstrapToken(ctx context.Context, id, secret string, expires time.Time, description string) error {
	if !bootstraputil.IsValidBootstrapToken(bootstraputil.TokenFromIDAndSecret(id, secret)) {
		return fmt.Errorf("kube: invalid bootstrap token %q.<secret>: want %s", id, bootstrapapi.BootstrapTokenPattern)
	}
	if expires.IsZero() {
		return errors.New("kube: bootstrap token " + id + " needs an expiry")
	}
	data := map[string][]byte{
		bootstrapapi.BootstrapTokenIDKey:               []byte(id),
		bootstrapapi.BootstrapTokenSecretKey:           []byte(secret),
		bootstrapapi.BootstrapTokenExpirationKey:       []byte(expires.UTC().Format(time.RFC3339)),
		bootstrapapi.BootstrapTokenUsageAuthentication: []byte("true"),
		bootstrapapi.BootstrapTokenUsageSigningKey:     []byte("true"),
		bootstrapapi.BootstrapTokenExtraGroupsKey:      []byte(BootstrapTokenGroup),
	}
	if description != "" {
		data[bootstrapapi.BootstrapTokenDescriptionKey] = []byte(description)
	}
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name:      bootstraputil.BootstrapTokenSecretName(id),
			Namespace: metav1.NamespaceSystem,
			Labels:    map[string]string{ManagedByLabel: ManagedByValue},
		},
		Type: bootstrapapi.SecretTypeBootstrapToken,
		Data: data,
	}
	api := c.cs.CoreV1().Secrets(metav1.NamespaceSystem)
	_, err := api.Create(ctx, s, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		var old *corev1.Secret
		old, err = api.Get(ctx, s.Name, metav1.GetOptions{})
		if err == nil {
			if old.Labels[ManagedByLabel] != ManagedByValue {
				return fmt.Errorf("kube: bootstrap token %s exists and was not created by the hub", id)
			}
			if old.Type != s.Type || !maps.EqualFunc(old.Data, s.Data, slices.Equal) {
				s.ResourceVersion = old.ResourceVersion
				_, err = api.Update(ctx, s, metav1.UpdateOptions{})
			}
		}
	}
	if err != nil {
		return fmt.Errorf("kube: creating bootstrap token %s: %w", id, err)
	}
	return nil
}

// DeleteBootstrapToken deletes Secret kube-system/bootstrap-token-<id>; the
// API server refuses the token from then on, except that it caches
// successful token authentications for 10 s (kube-apiserver's default), so
// a token used in the last 10 s may work that much longer. A token that
// does not exist is not an error.
func (c *Client) DeleteBootstrapToken(ctx context.Context, id string) error {
	if !bootstraputil.IsValidBootstrapTokenID(id) {
		return fmt.Errorf("kube: invalid bootstrap token id %q", id)
	}
	err := c.cs.CoreV1().Secrets(metav1.NamespaceSystem).Delete(ctx, bootstraputil.BootstrapTokenSecretName(id), metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("kube: deleting bootstrap token %s: %w", id, err)
	}
	return nil
}

// ListBootstrapTokens returns the bootstrap tokens the hub created (those
// labelled ManagedByLabel=ManagedByValue), expired ones included, sorted by
// ID. Tokens made by kubeadm or by hand are not listed.
func (c *Client) ListBootstrapTokens(ctx context.Context) ([]Token, error) {
	list, err := c.cs.CoreV1().Secrets(metav1.NamespaceSystem).List(ctx, metav1.ListOptions{
		LabelSelector: ManagedByLabel + "=" + ManagedByValue,
		FieldSelector: fields.OneTermEqualSelector("type", string(bootstrapapi.SecretTypeBootstrapToken)).String(),
	})
	if err != nil {
		return nil, fmt.Errorf("kube: listing bootstrap tokens: %w", err)
	}
	var out []Token
	for _, s := range list.Items {
		id := string(s.Data[bootstrapapi.BootstrapTokenIDKey])
		if s.Name != bootstraputil.BootstrapTokenSecretName(id) {
			continue // not a valid bootstrap token Secret: the API server ignores it too
		}
		t := Token{ID: id, Description: string(s.Data[bootstrapapi.BootstrapTokenDescriptionKey])}
		if exp := s.Data[bootstrapapi.BootstrapTokenExpirationKey]; len(exp) > 0 {
			if t.Expires, err = time.Parse(time.RFC3339, string(exp)); err != nil {
				return nil, fmt.Errorf("kube: bootstrap token %s: bad expiration %q", id, exp)
			}
		}
		out = append(out, t)
	}
	slices.SortFunc(out, func(a, b Token) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}
