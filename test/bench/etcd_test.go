package bench

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/roostfleet/roost/hub/ca"
	"github.com/roostfleet/roost/hub/kube/kubetest"
	"github.com/roostfleet/roost/internal/tlsconfig"
	"github.com/roostfleet/roost/test/harness"
)

// etcdValueBytes is the size of the value of every etcd Put: about the size
// of the encoded ApplyObjects command of BenchmarkCommit's Cluster objects
// with the metadata Raft and etcd add, as the issue's comparison used.
const etcdValueBytes = 300

// etcdVoters is the size of the etcd cluster, that of the comparison row
// of BenchmarkCommit.
const etcdVoters = 3

// BenchmarkEtcdPut measures etcd the way BenchmarkCommit measures the hub
// (hubs=processes),
// so that the summary can put the two side by side: a 3-member etcd (the
// binary hack/testbin/build.sh builds, `make testbin`) on 127.0.0.1 with
// TLS between members and to clients and fsync on (etcd's defaults), and
// one clientv3 client (one gRPC connection) to the leader whose
// goroutines each Put a new key with a 300-byte value and wait for it.
func BenchmarkEtcdPut(b *testing.B) {
	cli, pids := startEtcd(b, etcdVoters)
	value := strings.Repeat("v", etcdValueBytes)
	var runs int64
	for _, clients := range clientCounts(raftnodeWAL, etcdVoters) {
		b.Run(fmt.Sprintf("voters=%d/clients=%d", etcdVoters, clients), func(b *testing.B) {
			runs++
			run := runs
			r := commitRun(b, clients, pids, func(ctx context.Context, i int) error {
				_, err := cli.Put(ctx, fmt.Sprintf("/bench/r%d-%d", run, i), value)
				return err
			})
			r.procs, r.store, r.voters = true, storeEtcd, etcdVoters
			resultsMu.Lock()
			results[b.Name()] = r
			resultsMu.Unlock()
		})
	}
}

// storeEtcd is the store column of etcd's rows in the summary.
const storeEtcd = "etcd"

// etcdBinary returns the path of the etcd that hack/testbin/build.sh
// builds, failing with how to get it when it is missing.
func etcdBinary(b *testing.B) string {
	dir, err := kubetest.BinDir()
	if err != nil {
		b.Fatalf("etcd binary: %v; run `make testbin` (make bench does)", err)
	}
	bin := filepath.Join(dir, "etcd")
	if _, err := os.Stat(bin); err != nil {
		b.Fatalf("etcd binary: %v; run `make testbin` to build it (make bench does), or point $ROOST_TESTBIN_DIR at a folder holding etcd", err)
	}
	return bin
}

// startEtcd starts an etcd cluster of n members on loopback, with TLS
// certificates of a fresh hub CA (member certificates for the members,
// an admin one for the client), and returns a client of its leader and
// the members' process IDs. The members are killed when the benchmark
// ends.
func startEtcd(b *testing.B, n int) (*clientv3.Client, []int) {
	bin := etcdBinary(b)
	now := time.Now()
	caPB, err := ca.New("bench-etcd", now)
	if err != nil {
		b.Fatal(err)
	}
	auth, err := ca.Load(caPB)
	if err != nil {
		b.Fatal(err)
	}
	dir := b.TempDir()
	caFile := filepath.Join(dir, "ca.crt")
	write(b, caFile, caPB.GetCertificatePem())
	type member struct{ name, client, peer, cert, key string }
	members := make([]member, n)
	var initial []string
	for i := range members {
		m := member{name: fmt.Sprintf("etcd-%d", i+1), client: "https://" + harness.FreeAddr(b), peer: "https://" + harness.FreeAddr(b)}
		certPEM, keyPEM, err := auth.Issue(ca.Profile{CommonName: m.name, Role: ca.RoleMember, DNSNames: []string{"localhost"},
			IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, Lifetime: time.Hour}, now)
		if err != nil {
			b.Fatal(err)
		}
		m.cert, m.key = filepath.Join(dir, m.name+".crt"), filepath.Join(dir, m.name+".key")
		write(b, m.cert, certPEM)
		write(b, m.key, keyPEM)
		members[i] = m
		initial = append(initial, m.name+"="+m.peer)
	}
	var pids []int
	for _, m := range members {
		p := harness.StartProc(b, m.name, bin,
			"--name", m.name, "--data-dir", filepath.Join(dir, m.name),
			"--listen-client-urls", m.client, "--advertise-client-urls", m.client,
			"--listen-peer-urls", m.peer, "--initial-advertise-peer-urls", m.peer,
			"--initial-cluster", strings.Join(initial, ","), "--initial-cluster-state", "new",
			"--cert-file", m.cert, "--key-file", m.key, "--trusted-ca-file", caFile, "--client-cert-auth",
			"--peer-cert-file", m.cert, "--peer-key-file", m.key, "--peer-trusted-ca-file", caFile, "--peer-client-cert-auth",
			"--log-level", "warn")
		pids = append(pids, p.PID())
	}
	certPEM, keyPEM, err := auth.Issue(ca.Profile{CommonName: "bench", Role: ca.RoleAdmin, Lifetime: time.Hour}, now)
	if err != nil {
		b.Fatal(err)
	}
	tlsCfg, err := tlsconfig.ClientTLS(certPEM, keyPEM, auth.CertPool())
	if err != nil {
		b.Fatal(err)
	}
	ctx := harness.Context(b, harness.HealthyTimeout)
	var leader string
	if err := harness.Poll(ctx, func() error {
		var err error
		leader, err = etcdLeader(ctx, tlsCfg, members[0].client, len(members))
		return err
	}); err != nil {
		b.Fatalf("etcd cluster of %d did not elect a leader: %v", n, err)
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{leader}, TLS: tlsCfg, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cli.Close() })
	return cli, pids
}

// etcdLeader asks the member at endpoint for the cluster's members and
// returns the client URL of the leader once all n members are started.
func etcdLeader(ctx context.Context, tlsCfg *tls.Config, endpoint string, n int) (string, error) {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, TLS: tlsCfg, DialTimeout: time.Second, Logger: zap.NewNop()})
	if err != nil {
		return "", err
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	st, err := cli.Status(ctx, endpoint)
	if err != nil {
		return "", err
	}
	if st.Leader == 0 {
		return "", errors.New("no leader")
	}
	ml, err := cli.MemberList(ctx)
	if err != nil {
		return "", err
	}
	var leader string
	for _, m := range ml.Members {
		if len(m.ClientURLs) == 0 {
			return "", fmt.Errorf("member %x not started", m.ID)
		}
		if m.ID == st.Leader {
			leader = m.ClientURLs[0]
		}
	}
	if len(ml.Members) != n || leader == "" {
		return "", fmt.Errorf("%d members, leader %q", len(ml.Members), leader)
	}
	return leader, nil
}

func write(b *testing.B, path string, data []byte) {
	if err := os.WriteFile(path, data, 0o600); err != nil {
		b.Fatal(err)
	}
}
