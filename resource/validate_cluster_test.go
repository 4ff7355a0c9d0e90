package resource

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"math/big"
	"strings"
	"testing"
	"time"
)

// tokenKubeconfig is a valid spec.kubeconfig with a bearer token.
const tokenKubeconfig = `apiVersion: v1
kind: Config
clusters:
- name: prod
  cluster:
    server: https://10.0.0.1:6443
contexts:
- name: roost@prod
  context: {cluster: prod, user: roost}
current-context: roost@prod
users:
- name: roost
  user:
    token: sekret-token-0123456789
`

// testKeyPair returns a PEM client certificate and its key.
func testKeyPair(t *testing.T) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "roost-hub"},
		NotBefore: time.Unix(0, 0), NotAfter: time.Unix(0, 0).Add(200 * 365 * 24 * time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kd, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kd})
}

// kubeconfigWith builds a one-context kubeconfig with the given cluster
// and user bodies (YAML mappings, indented by four spaces).
func kubeconfigWith(cluster, user string) string {
	return "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n" + cluster +
		"contexts:\n- name: ctx\n  context: {cluster: c, user: u}\ncurrent-context: ctx\nusers:\n- name: u\n  user:\n" + user
}

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

func TestCheckKubeconfig(t *testing.T) {
	cert, key := testKeyPair(t)
	_, otherKey := testKeyPair(t)
	const server = "    server: https://10.0.0.1:6443\n"
	const token = "    token: sekret-token-0123456789\n"
	secrets := []string{"sekret-token-0123456789", b64(key), b64(otherKey), "hunter2-password", "notbase64!!!sekret"}
	for _, tc := range []struct {
		name, kubeconfig string
		want             string // part of the single violation's message and hint; "" for none
	}{
		{"token", tokenKubeconfig, ""},
		{"client certificate", kubeconfigWith(server+"    certificate-authority-data: "+b64([]byte(testCA))+"\n",
			"    client-certificate-data: "+b64(cert)+"\n    client-key-data: "+b64(key)+"\n"), ""},
		{"exec", kubeconfigWith(server, "    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: aws\n      args: [eks, get-token]\n"),
			`user "u" uses an exec credential plugin, which would run a command on every hub member; the hub refuses it`},
		{"json", `{"apiVersion":"v1","kind":"Config","clusters":[{"name":"c","cluster":{"server":"https://h:6443"}}],` +
			`"contexts":[{"name":"x","context":{"cluster":"c","user":"u"}}],"current-context":"x","users":[{"name":"u","user":{"token":"sekret-token-0123456789"}}]}`, ""},

		{"too big", tokenKubeconfig + "# " + strings.Repeat("x", MaxKubeconfigBytes) + "\n", "more than the limit of 65536 (64 KiB)"},
		{"blank", " \n", "is empty"},
		{"yaml syntax", "a: b: c", "does not parse as a kubeconfig: yaml: mapping values are not allowed"},
		{"a list", "- sekret-token-0123456789", "does not parse as a kubeconfig: it is not a YAML mapping"},
		{"wrong kind", "apiVersion: v1\nkind: Pod\n", `no kind "Pod" is registered for version "v1"; a kubeconfig has kind "Config"`},
		{"wrong type", "users:\n- name: u\n  user: {token: [sekret-token-0123456789]}\n", "users.user.token: want a string, got a list"},
		{"bad base64", kubeconfigWith(server, "    client-key-data: notbase64!!!sekret\n"), "is not base64"},

		{"no current context", strings.Replace(tokenKubeconfig, "current-context: roost@prod\n", "", 1),
			`has no current-context (contexts: "roost@prod")`},
		{"undefined context", strings.Replace(tokenKubeconfig, "current-context: roost@prod", "current-context: admin@prod", 1),
			`current context "admin@prod" is not defined (contexts: "roost@prod")`},
		{"context without cluster", strings.Replace(tokenKubeconfig, "{cluster: prod, user: roost}", "{user: roost}", 1),
			`current context "roost@prod" names no cluster`},
		{"undefined cluster", strings.Replace(tokenKubeconfig, "{cluster: prod,", "{cluster: dev,", 1),
			`current context "roost@prod" names cluster "dev", which is not defined (clusters: "prod")`},
		{"no server", kubeconfigWith("    insecure-skip-tls-verify: true\n", token), `cluster "c" has no server URL`},
		{"http server", kubeconfigWith("    server: http://10.0.0.1:8080\n", token), `cluster "c": server must be an https:// URL with a host, got "http://10.0.0.1:8080"`},
		{"server with password", kubeconfigWith("    server: http://admin:hunter2-password@h\n", token), `got "http://admin:xxxxx@h"`},
		{"ca file", kubeconfigWith(server+"    certificate-authority: /home/me/.minikube/ca.crt\n", token),
			`cluster "c" refers to the file certificate-authority "/home/me/.minikube/ca.crt", which the hub cannot read (inline it as certificate-authority-data, or let roostctl cluster set-credentials`},
		{"ca data", kubeconfigWith(server+"    certificate-authority-data: "+b64(key)+"\n", token),
			`cluster "c": certificate-authority-data PEM block 1 is a "PRIVATE KEY", not a CERTIFICATE`},

		{"context without user", strings.Replace(tokenKubeconfig, "{cluster: prod, user: roost}", "{cluster: prod}", 1),
			`current context "roost@prod" names no user`},
		{"undefined user", strings.Replace(tokenKubeconfig, "user: roost}", "user: admin}", 1),
			`current context "roost@prod" names user "admin", which is not defined (users: "roost")`},
		{"no credentials", kubeconfigWith(server, "    tokn: sekret-token-0123456789\n"), `user "u" has no credentials`},
		{"cert without key", kubeconfigWith(server, "    client-certificate-data: "+b64(cert)+"\n"), `user "u" has a client certificate but no key`},
		{"key without cert", kubeconfigWith(server, "    client-key-data: "+b64(key)+"\n"), `user "u" has a client key but no certificate`},
		{"foreign key", kubeconfigWith(server, "    client-certificate-data: "+b64(cert)+"\n    client-key-data: "+b64(otherKey)+"\n"),
			`user "u": client-certificate-data and client-key-data are not a usable key pair: the key does not belong to the certificate`},
		{"cert not pem", kubeconfigWith(server, "    client-certificate-data: "+b64([]byte("hello"))+"\n    client-key-data: "+b64(key)+"\n"),
			"the certificate is not PEM"},
		{"cert files", kubeconfigWith(server, "    client-certificate: me.crt\n    client-key: me.key\n"),
			`user "u" refers to the file client-certificate "me.crt", which the hub cannot read`},
		{"token file", kubeconfigWith(server, "    tokenFile: /var/run/secrets/token\n"),
			`user "u" refers to the file tokenFile "/var/run/secrets/token", which the hub cannot read (inline it as token,`},
		{"basic auth", kubeconfigWith(server, "    username: admin\n    password: hunter2-password\n"+token), "uses basic authentication"},
		{"auth provider", kubeconfigWith(server, "    auth-provider:\n      name: gcp\n"), `user "u" uses the auth-provider "gcp", which the hub does not support`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vs := CheckKubeconfig([]byte(tc.kubeconfig))
			if tc.want == "" {
				if len(vs) > 0 {
					t.Fatalf("want no violation, got:\n%s", violationsText(vs))
				}
				return
			}
			if len(vs) == 0 {
				t.Fatalf("want a violation with %q, got none", tc.want)
			}
			text := violationsText(vs)
			if vs[0].Field != "spec.kubeconfig" || !strings.Contains(vs[0].Message+" ("+vs[0].Hint+")", tc.want) {
				t.Errorf("got:\n%swant spec.kubeconfig with %q", text, tc.want)
			}
			if tc.name != "cert files" && tc.name != "basic auth" && len(vs) != 1 {
				t.Errorf("want one violation, got:\n%s", text)
			}
			for _, s := range secrets {
				if strings.Contains(text, s) || strings.Contains(text, s[:12]) {
					t.Errorf("a violation repeats a secret (%.12s…):\n%s", s, text)
				}
			}
		})
	}
}

// TestClusterKubeconfigViolationPath checks that Validate reports the
// kubeconfig's problems at spec.kubeconfig, after the other spec fields.
func TestClusterKubeconfigViolationPath(t *testing.T) {
	c := validCluster()
	c.Spec.ApiEndpoint = "http://h"
	c.Spec.Kubeconfig = "current-context: nope\n"
	checkViolations(t, Validate(Wrap(c)), []want{
		{"spec.apiEndpoint", "must be an https:// URL"},
		{"spec.kubeconfig", `current context "nope" is not defined`},
	})
}
