package agent

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	clientcmdv1 "k8s.io/client-go/tools/clientcmd/api/v1"
	"sigs.k8s.io/yaml"

	"github.com/roostfleet/roost/agent/config"
	"github.com/roostfleet/roost/internal/atomicfile"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// Names in the kubelet's bootstrap kubeconfig, as kubeadm join writes it.
const (
	bootstrapClusterName = "kubernetes"
	bootstrapUserName    = "tls-bootstrap-token-user"
	bootstrapContextName = bootstrapUserName + "@" + bootstrapClusterName
	// kubeletBootstrapMode keeps the token from other users.
	kubeletBootstrapMode fs.FileMode = 0o600
)

// KubeletBootstrapKubeconfig is the kubelet's bootstrap kubeconfig for b
// (kubeadm's bootstrap-kubelet.conf): the cluster at b.api_server trusted
// with the cluster CA the Revision writes (config.KubeletCAPath), the
// bootstrap token as the user, and a current context naming both. It
// fails when the API server is not an https URL or the token is not
// "<id>.<secret>"; errors never hold the secret.
func KubeletBootstrapKubeconfig(b *roostv1.KubeletBootstrap) ([]byte, error) {
	u, err := url.Parse(b.GetApiServer())
	if err != nil || u.Scheme != "https" || u.Host == "" {
		return nil, fmt.Errorf("kubelet bootstrap: API server %q is not an https:// URL", b.GetApiServer())
	}
	if !config.ValidToken(b.GetToken()) {
		return nil, fmt.Errorf("kubelet bootstrap: token %q… is not a bootstrap token (<6 letters or digits>.<16 letters or digits>)", tokenID(b.GetToken()))
	}
	kc := clientcmdv1.Config{
		APIVersion: "v1",
		Kind:       "Config",
		Clusters: []clientcmdv1.NamedCluster{{Name: bootstrapClusterName, Cluster: clientcmdv1.Cluster{
			Server: b.GetApiServer(), CertificateAuthority: config.KubeletCAPath,
		}}},
		AuthInfos: []clientcmdv1.NamedAuthInfo{{Name: bootstrapUserName, AuthInfo: clientcmdv1.AuthInfo{Token: b.GetToken()}}},
		Contexts: []clientcmdv1.NamedContext{{Name: bootstrapContextName, Context: clientcmdv1.Context{
			Cluster: bootstrapClusterName, AuthInfo: bootstrapUserName,
		}}},
		CurrentContext: bootstrapContextName,
	}
	return yaml.Marshal(&kc)
}

// tokenID is the public part of a bootstrap token ("abcdef" of
// "abcdef.0123456789abcdef"), at most 6 characters of whatever it is.
func tokenID(token string) string {
	id, _, _ := strings.Cut(token, ".")
	if len(id) > 6 {
		id = id[:6]
	}
	return id
}

func digestHex(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }

// applyKubeletBootstrap writes the kubelet's bootstrap kubeconfig while
// the hub hands a bootstrap token (b set: a worker that has not joined
// yet), and removes the file once it does not (the Node registered, or the
// Server is no worker) — only when the file still holds what the agent
// wrote (State.KubeletBootstrapSHA256), so a file someone else wrote is
// left alone. The kubelet's unit restarts until the file appears. Errors
// are logged: the next desired state (every reconnect sends one) retries.
func (a *Agent) applyKubeletBootstrap(b *roostv1.KubeletBootstrap) {
	path := a.host.KubeletBootstrapPath
	if b == nil {
		a.removeKubeletBootstrap(path)
		return
	}
	id := tokenID(b.GetToken())
	data, err := KubeletBootstrapKubeconfig(b)
	if err != nil {
		a.log.Error("kubelet bootstrap refused", "err", err)
		return
	}
	sum := digestHex(data)
	if cur, err := os.ReadFile(path); err == nil && bytes.Equal(cur, data) {
		if st, err := os.Stat(path); err == nil && st.Mode().Perm() == kubeletBootstrapMode {
			a.recordKubeletBootstrap(sum)
			return
		}
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		a.log.Error("kubelet bootstrap kubeconfig not written", "path", path, "token_id", id, "err", err)
		return
	}
	if err := atomicfile.WriteFile(path, data, kubeletBootstrapMode); err != nil {
		a.log.Error("kubelet bootstrap kubeconfig not written", "path", path, "token_id", id, "err", err)
		return
	}
	a.recordKubeletBootstrap(sum)
	args := []any{"path", path, "api_server", b.GetApiServer(), "token_id", id}
	if exp := b.GetExpiresAt(); exp != nil {
		args = append(args, "expires", exp.AsTime().UTC().Format(time.RFC3339))
		if !a.o.Clock.Now().Before(exp.AsTime()) {
			a.log.Warn("kubelet bootstrap kubeconfig written with an expired token (by this host's clock)", args...)
			return
		}
	}
	a.log.Info("kubelet bootstrap kubeconfig written", args...)
}

// removeKubeletBootstrap removes the bootstrap kubeconfig the agent wrote.
func (a *Agent) removeKubeletBootstrap(path string) {
	want := a.state.KubeletBootstrapSHA256
	if want == "" {
		return
	}
	cur, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		// gone already (/etc is in RAM: a reboot)
	case err != nil:
		a.log.Error("kubelet bootstrap kubeconfig not removed", "path", path, "err", err)
		return
	case digestHex(cur) != want:
		a.log.Warn("kubelet bootstrap kubeconfig changed since the agent wrote it; left alone", "path", path)
	default:
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			a.log.Error("kubelet bootstrap kubeconfig not removed", "path", path, "err", err)
			return
		}
		a.log.Info("kubelet bootstrap kubeconfig removed: the hub no longer hands a bootstrap token", "path", path)
	}
	a.recordKubeletBootstrap("")
}

// recordKubeletBootstrap remembers the digest of the bootstrap kubeconfig
// the agent wrote ("" for none) in its State.
func (a *Agent) recordKubeletBootstrap(sum string) {
	if a.state.KubeletBootstrapSHA256 == sum {
		return
	}
	a.state.KubeletBootstrapSHA256 = sum
	if err := a.o.Store.SaveState(a.state); err != nil {
		a.log.Error("kubelet bootstrap: recording the file the agent wrote (kept in memory)", "err", err)
	}
}
