package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/roostfleet/roost/bmc/redfish/redfishtest"
)

// bmcPassword is the emulated BMC's password: it must show up in no read,
// log or event of the hub.
const bmcPassword = "e2e-BMC-Pa55word-9d1f"

// bmcNode is a server provisioned through its emulated BMC.
type bmcNode struct {
	n       *rolloutNode
	qemu    *redfishtest.QEMU
	bmc     *redfishtest.Server
	started time.Time // when 'roostctl server provision' was run
}

// provisionByBMC puts n's VM under a Redfish BMC emulator (powered off, no
// CD), registers the server with the hub under its UUID with the BMC's
// address, user and password file (and its management MAC), checks that
// it has not booted, then runs 'roostctl server provision' with the
// enrollment ISO and waits until the BMC has powered the machine on with
// the ISO, fetched from the hub under a download token, in its virtual CD.
func (j *job) provisionByBMC(n *rolloutNode, mac, iso string) *bmcNode {
	j.t.Helper()
	q := n.vm.UnderBMC()
	srv, err := redfishtest.NewServer(redfishtest.Config{Machine: q, Username: "roost", Password: bmcPassword})
	if err != nil {
		j.t.Fatal(err)
	}
	j.t.Cleanup(srv.Close)
	pwFile := filepath.Join(j.t.TempDir(), "bmc-password")
	if err := os.WriteFile(pwFile, []byte(bmcPassword+"\n"), 0o600); err != nil {
		j.t.Fatal(err)
	}
	out := j.hub.MustCtl(j.t, j.ctx, "server", "register", n.uuid, "--bmc", srv.Address(), "--bmc-username", "roost",
		"--bmc-password-file", pwFile, "--insecure-skip-verify", "--mac", mac)
	j.t.Logf("roostctl server register %s: %s", n.uuid, strings.TrimSpace(out))
	if q.Running() {
		j.fatalf("%s runs before it was provisioned", n.hostname)
	}
	b := &bmcNode{n: n, qemu: q, bmc: srv, started: time.Now()}
	out = j.hub.MustCtl(j.t, j.ctx, "server", "provision", n.uuid, "--iso", iso)
	j.t.Logf("roostctl server provision %s: %s", n.uuid, strings.TrimSpace(out))
	j.poll(n.hostname+" powered on by its BMC with the ISO inserted", 5*time.Minute, func() (bool, string) {
		media, _ := q.CDMedia()
		return q.Running() && media != "", fmt.Sprintf("running %t, CD %q, BMC requests %d", q.Running(), media, len(srv.Requests()))
	})
	j.logTiming("provision to powered on with virtual media", time.Since(b.started))
	var inserted bool
	for _, r := range srv.Requests() {
		inserted = inserted || strings.HasSuffix(r.Path, "/Actions/VirtualMedia.InsertMedia")
	}
	if !inserted {
		j.fatalf("the hub powered %s on without inserting virtual media: %+v", n.hostname, srv.Requests())
	}
	return b
}

// checkEnrolled checks, once the server enrolled, that the hub ejected the
// media, that 'get servers -o wide' shows its POWER, that the BMCOperation
// condition says the provision succeeded, and that the BMC password is in
// no read of the server and not in the hub's log.
func (b *bmcNode) checkEnrolled(j *job) {
	j.t.Helper()
	j.logTiming("provision to enrolled", time.Since(b.started))
	var srv struct {
		Spec struct {
			BMC map[string]any `json:"bmc"`
		} `json:"spec"`
		Status struct {
			BMC struct {
				PowerState     string `json:"powerState"`
				MediaDigest    string `json:"mediaDigest"`
				CredentialsSet bool   `json:"credentialsSet"`
			} `json:"bmc"`
			Conditions []struct{ Type, Status, Reason, Message string } `json:"conditions"`
		} `json:"status"`
	}
	j.poll(b.n.hostname+"'s enrollment media ejected", 3*time.Minute, func() (bool, string) {
		out, err := j.hub.Ctl(j.ctx, "get", "server", b.n.uuid, "-o", "json")
		if err != nil {
			return false, err.Error()
		}
		if err := json.Unmarshal([]byte(out), &srv); err != nil {
			return false, err.Error()
		}
		media, _ := b.qemu.CDMedia()
		return srv.Status.BMC.MediaDigest == "" && media == "", fmt.Sprintf("recorded media %q, CD %q", srv.Status.BMC.MediaDigest, media)
	})
	if !srv.Status.BMC.CredentialsSet || srv.Spec.BMC["username"] != nil || srv.Spec.BMC["password"] != nil {
		j.fatalf("server %s: BMC spec %v, credentialsSet %t: want the credentials set and not shown", b.n.uuid, srv.Spec.BMC, srv.Status.BMC.CredentialsSet)
	}
	var op string
	for _, c := range srv.Status.Conditions {
		if c.Type == "BMCOperation" {
			op = c.Status + " " + c.Reason + ": " + c.Message
		}
	}
	if !strings.HasPrefix(op, "True Succeeded") {
		j.fatalf("server %s: BMCOperation %q, want True Succeeded", b.n.uuid, op)
	}
	wide := j.hub.MustCtl(j.t, j.ctx, "get", "servers", "-o", "wide")
	j.t.Logf("roostctl get servers -o wide:\n%s", wide)
	header, rows, _ := strings.Cut(wide, "\n")
	col := strings.Index(header, "POWER")
	if col < 0 {
		j.fatalf("get servers -o wide has no POWER column:\n%s", wide)
	}
	var power string
	for _, row := range strings.Split(rows, "\n") {
		if strings.HasPrefix(row, b.n.uuid) && len(row) > col {
			power = strings.Fields(row[col:])[0]
		}
	}
	if power != "On" {
		j.fatalf("POWER of %s is %q, want On:\n%s", b.n.uuid, power, wide)
	}
	for _, args := range [][]string{{"get", "server", b.n.uuid, "-o", "yaml"}, {"describe", "server", b.n.uuid}} {
		if out := j.hub.MustCtl(j.t, j.ctx, args...); strings.Contains(out, bmcPassword) {
			j.fatalf("roostctl %s shows the BMC password", strings.Join(args, " "))
		}
	}
	if log, err := os.ReadFile(j.hub.Log); err != nil || strings.Contains(string(log), bmcPassword) {
		j.fatalf("the hub log holds the BMC password (or cannot be read: %v)", err)
	}
}
