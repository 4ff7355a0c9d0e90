package e2e

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"github.com/roostfleet/roost/hub/kube/kubetest"
)

// The worker of TestWorker: its SMBIOS UUID, management MAC and host name
// (= its Node's name).
const (
	workerUUID     = "6f0e3c2a-52d1-4b7e-9a51-00000000e2f1"
	workerMAC      = "52:54:00:e2:00:21"
	workerHostname = "worker-1"
	// kubeletVersion is the version make testbin builds (hack/testbin/go.mod).
	kubeletVersion = "v1.34.4"
)

// workerJob is TestWorker's state: the job, the Kubernetes control plane
// on the host and the worker.
type workerJob struct {
	*job
	kube    *kubetest.Env
	cs      kubernetes.Interface
	vm      *VM
	sshPort int
	machine string
	pod     string // the workload's pod, once Running
}

// TestWorker makes a Roost Machine a real Kubernetes worker: etcd,
// kube-apiserver and kube-controller-manager run on the host (reachable
// from the guest as 10.0.2.2), a Cluster names them, a MachineClass runs
// the kubelet as a system extension built here from `make testbin`'s
// kubelet, and a server that enrolls from the ISO and is assigned to a
// Pool of that Cluster installs, boots its Revision (containerd from the
// OS image, the kubelet merged by systemd-sysext) and joins through its
// bootstrap token: its Node registers and turns Ready.
func TestWorker(t *testing.T) {
	tb := needTestbed(t)
	t.Parallel() // with TestMainJob: one vCPU each, see doc.go
	kubelet := needKubelet(t)
	kube := kubetest.Start(t, kubetest.WithNodes(net.ParseIP("10.0.2.2")))
	j := &workerJob{job: newJob(t, tb, 45*time.Minute), kube: kube, cs: kube.Clientset()}
	ctx := j.ctx

	// ---- 1. the kubelet as a signed system extension -------------------------
	step := time.Now()
	raw := j.kubeletExtension(kubelet)
	j.hub.MustCtl(t, ctx, "extension", "push", raw)
	j.logTiming("kubelet extension built and pushed", time.Since(step))

	// ---- 2. the release on channel test; the Cluster, its credentials, a
	// MachineClass and a Pool
	j.promote(readRelease(t, tb.Bundle).Version, "test")
	endpoint := "https://10.0.2.2:" + kube.URL[strings.LastIndex(kube.URL, ":")+1:]
	j.apply("cluster.yaml", clusterManifest("e2e", endpoint, string(kube.CAPEM)))
	kc := filepath.Join(t.TempDir(), "hub.kubeconfig")
	if err := os.WriteFile(kc, kube.Kubeconfig, 0o600); err != nil {
		t.Fatal(err)
	}
	j.hub.MustCtl(t, ctx, "cluster", "set-credentials", "e2e", "--kubeconfig", kc)
	j.apply("workers.yaml", machineClass(j.sshPub(), "kubelet")+"---\n"+workersPool("test"))
	j.describe = append(j.describe, "cluster e2e", "pool workers")

	// ---- 3. the server enrolls from the ISO ----------------------------------
	iso := j.enrollmentISO()
	j.sshPort = freePort(t)
	j.vm = j.newVM(VMConfig{Dir: filepath.Join(t.TempDir(), "vm"), ISO: iso, UUID: workerUUID, MgmtMAC: workerMAC, SSHPort: j.sshPort, MemoryMiB: 2560})
	step = time.Now()
	j.vm.Start()
	j.waitEnrolled(15*time.Minute, workerUUID)
	j.logTiming("boot-to-enrolled", time.Since(step))
	j.checkEnrollmentLogs()

	// ---- 4. assign: install, boot the Revision, join --------------------------
	assigned := time.Now()
	j.machine = j.assign("workers", workerUUID, workerHostname)
	node := j.waitNode("Node "+workerHostname+" registered", 25*time.Minute, func(n *corev1.Node) bool { return n != nil })
	j.logTiming("assign → Node registered", time.Since(assigned))
	j.waitNode("Node "+workerHostname+" Ready", 10*time.Minute, nodeReady)
	j.logTiming("assign → Node Ready", time.Since(assigned))
	if got := node.Spec.ProviderID; got != "roost://"+strings.ToLower(workerUUID) && !strings.EqualFold(got, "roost://"+workerUUID) {
		j.fatalf("Node providerID %q, want roost://%s", got, workerUUID)
	}
	if node.Labels["example.com/tier"] != "e2e" || node.Labels["roost.io/pool"] != "workers" {
		j.fatalf("Node labels %v lack the Pool's", node.Labels)
	}
	j.waitReady(j.machine, "Machine Ready (Joined, boot assessed with the kubelet healthy)", 0, 10*time.Minute)
	j.logTiming("assign → Machine Ready", time.Since(assigned))

	// ---- 5. on the host: the extension merged, the runtime on STATE ----------
	// (the agent, too, runs from its extension: the testbed OS has none)
	out := j.waitSSH(j.sshPort, "systemd-sysext status --no-pager; command -v kubelet; command -v roost-agent; findmnt -rno TARGET | grep -E '^/var/lib/(containerd|kubelet)$'; sudo systemctl is-active containerd kubelet")
	for _, want := range []string{"kubelet", "roost-agent", "/usr/bin/kubelet", "/usr/bin/roost-agent", "/var/lib/containerd", "/var/lib/kubelet", "active\nactive"} {
		if !strings.Contains(out, want) {
			j.fatalf("on the worker, %q lacks %q", out, want)
		}
	}
	t.Logf("worker: %s", strings.ReplaceAll(out, "\n", " | "))

	// ---- 6. a pod guarded by a PodDisruptionBudget runs on the Node -----------
	step = time.Now()
	archive := imageArchive(t)
	if out, err := j.sshStdin(archive, "sudo ctr -n k8s.io images import -"); err != nil {
		j.fatalf("importing the test images: %v", err)
	} else {
		t.Logf("ctr images import: %s", strings.TrimSpace(out))
	}
	j.startPod()
	j.logTiming("images imported, pod Running and Ready", time.Since(step))

	// ---- 7. v1 → v2: cordon, the budget holds the drain, evict, reboot --------
	// One apply changes the class (an Ignition snippet: a file, a unit, a
	// sysctl) and moves the Pool to the channel of v2: one Revision, one
	// rollout.
	bundle, v2 := j.releaseV2()
	j.pushImage(bundle)
	j.promote(v2, "v2")
	j.apply("workers-v2.yaml", machineClassWith(j.sshPub(), classSnippet, "kubelet")+"---\n"+workersPool("v2"))
	rolled := time.Now()
	j.waitNode("Node cordoned for the rollout", 10*time.Minute, func(n *corev1.Node) bool { return n != nil && n.Spec.Unschedulable })
	j.logTiming("v2 promoted → Node cordoned", time.Since(rolled))
	why := j.waitSaid("the reboot waits on PodDisruptionBudget web", 5*time.Minute, "PodDisruptionBudget web", "pool workers", "machine "+j.machine)
	t.Logf("held: %s", why)
	if _, err := j.getPod(); err != nil {
		j.fatalf("the pod guarded by a budget that allows no disruption is gone: %v", err)
	}
	j.allowDisruption()
	step = time.Now()
	j.waitPodGone(5 * time.Minute)
	j.logTiming("budget relaxed → pod evicted", time.Since(step))
	step = time.Now()
	rev2 := j.waitReady(j.machine, "Machine Ready on the v2 Revision", 0, 20*time.Minute)
	j.checkImage(&rolloutNode{uuid: workerUUID, hostname: workerHostname}, v2)
	j.waitNode("Node Ready and uncordoned on v2", 10*time.Minute, func(n *corev1.Node) bool { return nodeReady(n) && !n.Spec.Unschedulable })
	j.logTiming("evicted → rebooted, Node Ready and uncordoned on v2 (revision "+fmt.Sprint(rev2)+")", time.Since(step))
	j.logTiming("v1 → v2 rollout of the worker", time.Since(rolled))
	out = j.waitSSH(j.sshPort, "cat /etc/roost-e2e/class-file; sudo systemctl is-active e2e-class.service 2>/dev/null; cat /proc/sys/net/ipv4/tcp_keepalive_time")
	if want := "from the MachineClass\nactive\n617"; out != want {
		j.fatalf("the class snippet on the worker after the rollout: %q, want %q", out, want)
	}
	t.Logf("class snippet: %s", strings.ReplaceAll(out, "\n", " | "))

	// ---- 8. a kubelet that cannot start: the class pins it, the worker
	// reboots into it, the boot never turns healthy, uses its one boot try
	// (spec.bootTries: 1, so CI waits for one assessment, not three) and
	// falls back to the previous Revision; the Revision is Failed and the
	// Pool halts
	step = time.Now()
	broken := j.brokenKubeletExtension()
	j.hub.MustCtl(t, ctx, "extension", "push", broken)
	j.apply("workers-broken.yaml", machineClassWith(j.sshPub(), "  bootAssessmentTimeout: 60s\n  bootTries: 1\n", "kubelet="+brokenKubeletVersion))
	var rev3 int64
	j.poll("a new Revision with the broken kubelet", 5*time.Minute, func() (bool, string) {
		m, err := j.getMachine(j.machine)
		if err != nil {
			return false, err.Error()
		}
		rev3 = int64(m.Status.Revision)
		return rev3 > rev2, machineState(m)
	})
	j.poll(fmt.Sprintf("Revision %d Failed, back on %d, Pool halted", rev3, rev2), 30*time.Minute, func() (bool, string) {
		m, err := j.getMachine(j.machine)
		if err != nil {
			return false, err.Error()
		}
		p := j.getPool("workers")
		st := m.Status
		return int64(st.FailedRevision) == rev3 && int64(st.BootedRevision) == rev2 && p.Status.Rollout.Phase == "Halted",
			machineState(m) + "; pool " + p.Status.Rollout.Phase + ": " + p.Status.Rollout.Reason
	})
	j.logTiming(fmt.Sprintf("broken kubelet → fallback (revision %d failed, back on %d)", rev3, rev2), time.Since(step))
	j.waitNode("Node Ready again on the previous Revision", 10*time.Minute, nodeReady)
	t.Logf("pool workers: %s", j.getPool("workers").Status.Rollout.Reason)

	// ---- 9. the failed boot's journal, read after the fallback; a bundle -----
	j.checkFailedBootLogs(rev3)
	j.checkBundle()
}

// serverName is the worker's Server name (its SMBIOS UUID, lower-case).
func (j *workerJob) serverName() string { return strings.ToLower(workerUUID) }

// checkEnrollmentLogs reads the enrolling server's journal through its
// agent's stream (roostctl server logs, the ISO's agent, before any
// install): the agent's own lines of this boot, that it enrolled and
// connected, are there. One call, retried briefly: the Server is
// recorded just before its agent's stream opens.
func (j *workerJob) checkEnrollmentLogs() {
	j.t.Helper()
	name := j.serverName()
	var out string
	j.poll("the enrolling agent's log through roostctl server logs", 2*time.Minute, func() (bool, string) {
		var err error
		out, err = j.hub.Ctl(j.ctx, "server", "logs", name, "-u", "roost-agent", "-n", "200")
		if err != nil {
			return false, err.Error()
		}
		return strings.Contains(out, "msg=enrolled") && strings.Contains(out, "server="+name) && strings.Contains(out, "msg=connected"),
			fmt.Sprintf("%d lines, no enrolled/connected line yet", strings.Count(out, "\n"))
	})
	j.t.Logf("enrolling agent's log (%d lines), e.g. %q", strings.Count(out, "\n"), firstLineWith(out, "msg=enrolled"))
	// -o json: journalctl's export fields, one entry per line
	js := j.hub.MustCtl(j.t, j.ctx, "server", "logs", name, "-u", "roost-agent", "-n", "5", "-o", "json")
	if n := strings.Count(js, "\n"); n != 5 || !strings.Contains(js, `"_SYSTEMD_UNIT":"roost-agent.service"`) {
		j.fatalf("server logs -o json: %d lines, want 5 entries of roost-agent.service:\n%s", n, js)
	}
}

// checkFailedBootLogs reads the previous boot's journal after the
// fallback: the boot of Revision failed, kept on the STATE partition, in
// which the broken kubelet (brokenKubeletExtension) printed its line at
// every start; this boot's kubelet is the good one.
func (j *workerJob) checkFailedBootLogs(failed int64) {
	j.t.Helper()
	name := j.serverName()
	out := j.hub.MustCtl(j.t, j.ctx, "server", "logs", name, "--boot", "-1", "-u", "kubelet")
	if !strings.Contains(out, "kubelet: broken on purpose by TestWorker") {
		j.fatalf("server logs --boot -1 -u kubelet (the boot of Revision %d) lacks the broken kubelet's line:\n%s", failed, tail(out, 3000))
	}
	j.t.Logf("failed boot's kubelet: %d lines, e.g. %q", strings.Count(out, "\n"), firstLineWith(out, "broken on purpose"))
	now := j.hub.MustCtl(j.t, j.ctx, "server", "logs", name, "-u", "kubelet", "-n", "200")
	if strings.Contains(now, "broken on purpose") {
		j.fatalf("this boot's kubelet log holds the broken kubelet's line: the boots are mixed up:\n%s", tail(now, 3000))
	}
}

// checkBundle saves a support bundle and checks its entries: every one
// the agent collects (agent/bundle.go), each non-empty, the Revisions'
// boot entries, the failed boot's kubelet line in the previous boot's
// journal, and errors.txt.
func (j *workerJob) checkBundle() {
	j.t.Helper()
	file := filepath.Join(j.t.TempDir(), "bundle.tar.gz")
	out := j.hub.MustCtl(j.t, j.ctx, "server", "bundle", j.serverName(), "-o", file)
	j.t.Logf("%s", strings.TrimSpace(out))
	entries, err := readTarGz(file)
	if err != nil {
		j.fatalf("the bundle %s: %v", file, err)
	}
	// bootctl is Debian's systemd-boot package, which the testbed lacks:
	// then errors.txt names the entry
	if _, ok := entries["boot/bootctl-list.txt"]; !ok && !strings.Contains(entries["errors.txt"], "boot/bootctl-list.txt: ") {
		j.fatalf("the bundle has no boot/bootctl-list.txt and errors.txt does not say why:\n%s", entries["errors.txt"])
	}
	for _, want := range []string{"journal/this-boot.log", "journal/previous-boot.log", "agent/state.json", "agent/inventory.json",
		"network/ip-addr.json", "network/ip-link.json", "network/ip-route.json", "dmesg.txt",
		"units/kubelet-containerd-status.txt", "errors.txt"} {
		if e, ok := entries[want]; !ok || (len(e) == 0 && want != "errors.txt") {
			j.fatalf("the bundle lacks %s (or it is empty); entries %v; errors.txt:\n%s", want, keysOf(entries), entries["errors.txt"])
		}
	}
	var loader bool
	for n := range entries {
		loader = loader || strings.HasPrefix(n, "boot/loader-entries/roost-rev-")
	}
	if !loader {
		j.fatalf("the bundle holds no boot/loader-entries/roost-rev-*.conf: %v", keysOf(entries))
	}
	if !strings.Contains(entries["journal/previous-boot.log"], "broken on purpose by TestWorker") {
		j.fatalf("the bundle's previous boot lacks the broken kubelet's line")
	}
	if st := entries["units/kubelet-containerd-status.txt"]; !strings.Contains(st, "kubelet.service") || !strings.Contains(st, "containerd.service") {
		j.fatalf("units/kubelet-containerd-status.txt:\n%s", st)
	}
	j.t.Logf("bundle: %d entries; errors.txt: %s", len(entries), strings.TrimSpace(entries["errors.txt"]))
}

// readTarGz reads a tar.gz file's regular files by name.
func readTarGz(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		return nil, err
	}
	tr := tar.NewReader(gz)
	out := map[string]string{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			return out, err
		}
		out[h.Name] = string(b)
	}
}

func keysOf(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// firstLineWith is the first line of s holding sub, "" for none.
func firstLineWith(s, sub string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			return l
		}
	}
	return ""
}

// workersPool is the Pool "workers" of Cluster e2e following channel.
func workersPool(channel string) string {
	return `apiVersion: roost.io/v1
kind: Pool
metadata:
  name: workers
spec:
  cluster: e2e
  machineClass: e2e
  imageChannel: ` + channel + `
  nodeLabels:
    example.com/tier: e2e
`
}

// classSnippet is MachineClass spec lines with an Ignition snippet: a
// file, an enabled unit and a sysctl file (acceptance 5 of the worker
// issue: it reaches the Machine after one rollout).
const classSnippet = `  ignition: |
    ignition:
      version: 3.3.0
    storage:
      files:
        - path: /etc/roost-e2e/class-file
          mode: 0644
          contents:
            source: "data:,from%20the%20MachineClass%0A"
        - path: /etc/sysctl.d/90-roost-e2e.conf
          mode: 0644
          contents:
            source: "data:,net.ipv4.tcp_keepalive_time%20%3D%20617%0A"
    systemd:
      units:
        - name: e2e-class.service
          enabled: true
          contents: |
            [Unit]
            Description=A unit from the MachineClass
            [Service]
            Type=oneshot
            RemainAfterExit=yes
            ExecStart=/bin/true
            [Install]
            WantedBy=multi-user.target
`

// brokenKubeletVersion is the version of a kubelet extension whose
// /usr/bin/kubelet exits 1 at once.
const brokenKubeletVersion = "v1.34.4-broken"

func (j *workerJob) brokenKubeletExtension() string {
	j.t.Helper()
	dir := j.t.TempDir()
	script := filepath.Join(dir, "kubelet")
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho 'kubelet: broken on purpose by TestWorker' >&2\nexit 1\n"), 0o755); err != nil {
		j.t.Fatal(err)
	}
	raw := filepath.Join(dir, "kubelet-"+brokenKubeletVersion+".raw")
	key := strings.TrimSuffix(j.tb.ReleaseKey, ".pub") + ".key"
	out, err := exec.CommandContext(j.ctx, filepath.Join(j.tb.Bin, "roost-image"), "sysext", "--name", "kubelet", "--version", brokenKubeletVersion,
		"--file", script+":/usr/bin/kubelet", "--key", key, "-o", raw).CombinedOutput()
	if err != nil {
		j.t.Fatalf("roost-image sysext (broken kubelet): %v\n%s", err, out)
	}
	return raw
}

// sshStdin runs command on the worker as core with file as its standard
// input.
func (j *workerJob) sshStdin(file, command string) (string, error) {
	f, err := os.Open(file)
	if err != nil {
		return "", err
	}
	defer f.Close()
	ctx, cancel := context.WithTimeout(j.ctx, 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "ssh", append(sshOptions(j.sshKey, j.sshPort), command)...)
	cmd.Stdin = f
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("ssh %q: %v\n%s", command, err, out)
	}
	return string(out), nil
}

// The workload: ReplicaSet "web" of one pod bound to the worker (there is
// no scheduler: the template names the node; kubectl's drain, which the
// hub uses, refuses bare pods), and a PodDisruptionBudget that allows no
// disruption.
const workloadNamespace = "default"

func (j *workerJob) startPod() {
	j.t.Helper()
	ctx := j.ctx
	one := intstr.FromInt32(1)
	labels := map[string]string{"app": "web"}
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: workloadNamespace},
		Spec:       policyv1.PodDisruptionBudgetSpec{MinAvailable: &one, Selector: &metav1.LabelSelector{MatchLabels: labels}},
	}
	if _, err := j.cs.PolicyV1().PodDisruptionBudgets(workloadNamespace).Create(ctx, pdb, metav1.CreateOptions{}); err != nil {
		j.fatalf("creating the PodDisruptionBudget: %v", err)
	}
	no, grace, replicas := false, int64(5), int32(1)
	rs := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: workloadNamespace},
		Spec: appsv1.ReplicaSetSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					NodeName:                      workerHostname,
					AutomountServiceAccountToken:  &no,
					TerminationGracePeriodSeconds: &grace,
					Containers:                    []corev1.Container{{Name: "web", Image: appImage, ImagePullPolicy: corev1.PullNever}},
				},
			},
		},
	}
	if _, err := j.cs.AppsV1().ReplicaSets(workloadNamespace).Create(ctx, rs, metav1.CreateOptions{}); err != nil {
		j.fatalf("creating the ReplicaSet: %v", err)
	}
	j.poll("pod of ReplicaSet web Running and Ready, the budget allowing no disruption", 10*time.Minute, func() (bool, string) {
		p, err := j.getPod()
		if err != nil {
			return false, err.Error()
		}
		b, err := j.cs.PolicyV1().PodDisruptionBudgets(workloadNamespace).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		ready := false
		for _, c := range p.Status.Conditions {
			ready = ready || (c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue)
		}
		state := fmt.Sprintf("pod %s %s ready=%v; budget healthy %d/%d, disruptions allowed %d", p.Name, p.Status.Phase, ready,
			b.Status.CurrentHealthy, b.Status.DesiredHealthy, b.Status.DisruptionsAllowed)
		for _, cs := range p.Status.ContainerStatuses {
			if w := cs.State.Waiting; w != nil {
				state += fmt.Sprintf("; %s waiting: %s %s", cs.Name, w.Reason, w.Message)
			}
		}
		if ready {
			j.pod = p.Name
		}
		return ready && b.Status.CurrentHealthy == 1 && b.Status.DisruptionsAllowed == 0 && b.Status.ObservedGeneration == b.Generation, state
	})
}

// getPod is the workload's pod: the one named j.pod once known, else the
// first of the ReplicaSet's.
func (j *workerJob) getPod() (*corev1.Pod, error) {
	ctx, cancel := context.WithTimeout(j.ctx, 10*time.Second)
	defer cancel()
	if j.pod != "" {
		return j.cs.CoreV1().Pods(workloadNamespace).Get(ctx, j.pod, metav1.GetOptions{})
	}
	l, err := j.cs.CoreV1().Pods(workloadNamespace).List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
	if err != nil {
		return nil, err
	}
	if len(l.Items) == 0 {
		return nil, fmt.Errorf("no pod of ReplicaSet web yet")
	}
	return &l.Items[0], nil
}

// allowDisruption relaxes the budget to maxUnavailable 1.
func (j *workerJob) allowDisruption() {
	j.t.Helper()
	patch := []byte(`{"spec":{"minAvailable":null,"maxUnavailable":1}}`)
	if _, err := j.cs.PolicyV1().PodDisruptionBudgets(workloadNamespace).Patch(j.ctx, "web", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		j.fatalf("relaxing the PodDisruptionBudget: %v", err)
	}
	j.t.Logf("PodDisruptionBudget web relaxed to maxUnavailable 1")
}

func (j *workerJob) waitPodGone(timeout time.Duration) {
	j.t.Helper()
	j.poll("pod "+j.pod+" evicted", timeout, func() (bool, string) {
		p, err := j.getPod()
		if apierrors.IsNotFound(err) {
			return true, "pod " + j.pod + " gone"
		}
		if err != nil {
			return false, err.Error()
		}
		return false, fmt.Sprintf("pod %s deleting=%v", p.Status.Phase, p.DeletionTimestamp != nil)
	})
}

// waitSaid waits until `roostctl describe` of one of objects says substr,
// and returns the line that does.
func (j *workerJob) waitSaid(what string, timeout time.Duration, substr string, objects ...string) string {
	j.t.Helper()
	var line string
	j.poll(what, timeout, func() (bool, string) {
		for _, o := range objects {
			out, _ := j.hub.Ctl(j.ctx, append([]string{"describe"}, strings.Fields(o)...)...)
			for _, l := range strings.Split(out, "\n") {
				if strings.Contains(l, substr) {
					line = o + ": " + strings.TrimSpace(l)
					return true, line
				}
			}
		}
		return false, "nobody says " + substr + " yet"
	})
	return line
}

// needKubelet is the kubelet make testbin builds; the test fails without it
// (make e2e builds it).
func needKubelet(t *testing.T) string {
	t.Helper()
	dir, err := kubetest.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "kubelet")
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("no kubelet (make testbin): %v", err)
	}
	return p
}

// kubeletExtension builds the kubelet's system extension with roost-image
// sysext, signed with the testbed's release key.
func (j *workerJob) kubeletExtension(kubelet string) string {
	j.t.Helper()
	raw := filepath.Join(j.t.TempDir(), "kubelet-"+kubeletVersion+".raw")
	key := strings.TrimSuffix(j.tb.ReleaseKey, ".pub") + ".key"
	out, err := exec.CommandContext(j.ctx, filepath.Join(j.tb.Bin, "roost-image"), "sysext", "--name", "kubelet", "--version", kubeletVersion,
		"--file", kubelet+":/usr/bin/kubelet", "--key", key, "-o", raw).CombinedOutput()
	if err != nil {
		j.t.Fatalf("roost-image sysext: %v\n%s", err, out)
	}
	j.t.Logf("roost-image sysext: %s", strings.TrimSpace(string(out)))
	return raw
}

// clusterManifest is a Cluster at endpoint trusting caPEM.
func clusterManifest(name, endpoint, caPEM string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: roost.io/v1\nkind: Cluster\nmetadata:\n  name: %s\nspec:\n  apiEndpoint: %s\n  kubernetesVersion: %s\n", name, endpoint, kubeletVersion)
	b.WriteString("  caBundle: |\n")
	for _, l := range strings.Split(strings.TrimSpace(caPEM), "\n") {
		b.WriteString("    " + l + "\n")
	}
	b.WriteString("  join:\n    clusterDns: [10.0.0.10]\n  drainTimeout: 3m\n")
	return b.String()
}

// waitNode waits until the worker's Node satisfies ok (called with nil
// while there is none) and returns it.
func (j *workerJob) waitNode(what string, timeout time.Duration, ok func(*corev1.Node) bool) *corev1.Node {
	j.t.Helper()
	var node *corev1.Node
	j.poll(what, timeout, func() (bool, string) {
		ctx, cancel := context.WithTimeout(j.ctx, 10*time.Second)
		defer cancel()
		n, err := j.cs.CoreV1().Nodes().Get(ctx, workerHostname, metav1.GetOptions{})
		if err != nil {
			if m, merr := j.getMachine(j.machine); merr == nil {
				return ok(nil), "no Node yet; Machine " + machineState(m)
			}
			return ok(nil), "no Node yet: " + err.Error()
		}
		node = n
		return ok(n), nodeState(n)
	})
	return node
}

func nodeReady(n *corev1.Node) bool {
	if n == nil {
		return false
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func nodeState(n *corev1.Node) string {
	s := "Node " + n.Name
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			s += fmt.Sprintf(" Ready=%s (%s: %s)", c.Status, c.Reason, c.Message)
		}
	}
	if n.Spec.Unschedulable {
		s += " cordoned"
	}
	return s
}
