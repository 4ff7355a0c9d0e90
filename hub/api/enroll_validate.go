package api

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"regexp"
	"unicode/utf8"

	"github.com/roostfleet/roost/apierror"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// Bounds on what an agent may send. They are generous for real hardware and
// keep one request from costing the hub much memory.
const (
	MaxDisks      = 256
	MaxNICs       = 256
	MaxMACs       = 256
	MaxConditions = 64
	MaxString     = 256  // names, models, serials, versions
	MaxMessage    = 1024 // condition messages
	MaxCSRBytes   = 16 << 10
)

// enrollmentTokenRE is a kubeadm-style token: "<6 id>.<16 secret>".
var enrollmentTokenRE = regexp.MustCompile(`^([a-z0-9]{6})\.([a-z0-9]{16})$`)

var uuidTextRE = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)

// ParseEnrollmentToken splits a token secret into its id (the
// EnrollmentToken's name) and the hex sha256 of the whole secret, as stored.
func ParseEnrollmentToken(s string) (id, secretSHA256 string, err error) {
	m := enrollmentTokenRE.FindStringSubmatch(s)
	if m == nil {
		return "", "", fmt.Errorf(`malformed enrollment token: want "<6 lower-case letters or digits>.<16 lower-case letters or digits>" as printed by 'roostctl token create'`)
	}
	sum := sha256.Sum256([]byte(s))
	return m[1], hex.EncodeToString(sum[:]), nil
}

// fieldChecker collects violations.
type fieldChecker struct{ vs []apierror.Violation }

func (c *fieldChecker) add(field, format string, a ...any) {
	c.vs = append(c.vs, apierror.Violation{Field: field, Message: fmt.Sprintf(format, a...)})
}

func (c *fieldChecker) str(field, s string, limit int) {
	if len(s) > limit {
		c.add(field, "is %d bytes long; at most %d allowed", len(s), limit)
	} else if !utf8.ValidString(s) {
		c.add(field, "is not valid UTF-8")
	}
}

func (c *fieldChecker) nonNeg(field string, n int64) {
	if n < 0 {
		c.add(field, "must be ≥ 0, got %d", n)
	}
}

func (c *fieldChecker) mac(field, m string) {
	if len(m) > 64 {
		c.add(field, "is not a MAC address")
		return
	}
	if _, err := net.ParseMAC(m); err != nil {
		c.add(field, "%q is not a MAC address (want e.g. 52:54:00:12:34:56)", m)
	}
}

// ValidateEnrollRequest checks an EnrollRequest without state. Field paths
// use the JSON names ("identity.systemUuid", "inventory.disks[3].sizeBytes").
func ValidateEnrollRequest(req *roostv1.EnrollRequest) []apierror.Violation {
	c := &fieldChecker{}
	if _, _, err := ParseEnrollmentToken(req.GetToken()); err != nil {
		c.add("token", "%s", err.Error())
	}
	if len(req.GetCsrPem()) == 0 {
		c.add("csrPem", "is required")
	} else if len(req.GetCsrPem()) > MaxCSRBytes {
		c.add("csrPem", "is %d bytes long; at most %d allowed", len(req.GetCsrPem()), MaxCSRBytes)
	} else if err := checkCSR(req.GetCsrPem()); err != nil {
		c.add("csrPem", "%s", err.Error())
	}
	validateServerReport(c, req.GetIdentity(), req.GetInventory(), req.GetAgentVersion())
	return c.vs
}

// ValidateReregisterRequest checks a re-registration at the edge: the
// identity, inventory and agent version as ValidateEnrollRequest does.
func ValidateReregisterRequest(req *roostv1.ReregisterRequest) []apierror.Violation {
	c := &fieldChecker{}
	validateServerReport(c, req.GetIdentity(), req.GetInventory(), req.GetAgentVersion())
	c.str("server", req.GetServer(), MaxString)
	return c.vs
}

// validateServerReport checks what an agent says of its Server when it
// enrolls or re-registers.
func validateServerReport(c *fieldChecker, id *roostv1.ServerIdentity, inv *roostv1.Inventory, agentVersion string) {
	if id == nil {
		c.add("identity", "is required")
	}
	if u := id.GetSystemUuid(); u != "" && !uuidTextRE.MatchString(u) {
		if len(u) > 64 {
			u = u[:64] + "…"
		}
		c.add("identity.systemUuid", "%q is not a UUID (want the RFC 4122 text form, e.g. 4c4c4544-0042-3510-8052-b4c04f4d4e31, or empty)", u)
	}
	if n := len(id.GetPermanentMacs()); n > MaxMACs {
		c.add("identity.permanentMacs", "has %d entries; at most %d allowed", n, MaxMACs)
	} else {
		for i, m := range id.GetPermanentMacs() {
			c.mac(fmt.Sprintf("identity.permanentMacs[%d]", i), m)
		}
	}
	if id != nil && id.GetSystemUuid() == "" && len(id.GetPermanentMacs()) == 0 {
		c.add("identity", "needs a systemUuid or at least one permanent MAC address")
	}
	c.str("agentVersion", agentVersion, MaxString)
	validateInventory(c, "inventory", inv)
}

// validateInventory checks an inventory (nil is allowed).
func validateInventory(c *fieldChecker, p string, inv *roostv1.Inventory) {
	if inv == nil {
		return
	}
	cpu := inv.GetCpu()
	c.str(p+".cpu.model", cpu.GetModel(), MaxString)
	c.nonNeg(p+".cpu.sockets", int64(cpu.GetSockets()))
	c.nonNeg(p+".cpu.cores", int64(cpu.GetCores()))
	c.nonNeg(p+".cpu.threads", int64(cpu.GetThreads()))
	c.nonNeg(p+".memoryBytes", inv.GetMemoryBytes())
	if n := len(inv.GetDisks()); n > MaxDisks {
		c.add(p+".disks", "has %d entries; at most %d allowed", n, MaxDisks)
	} else {
		for i, d := range inv.GetDisks() {
			dp := fmt.Sprintf("%s.disks[%d]", p, i)
			c.str(dp+".name", d.GetName(), MaxString)
			c.nonNeg(dp+".sizeBytes", d.GetSizeBytes())
			c.str(dp+".serial", d.GetSerial(), MaxString)
			c.str(dp+".wwn", d.GetWwn(), MaxString)
			c.str(dp+".model", d.GetModel(), MaxString)
		}
	}
	if n := len(inv.GetNics()); n > MaxNICs {
		c.add(p+".nics", "has %d entries; at most %d allowed", n, MaxNICs)
	} else {
		for i, n := range inv.GetNics() {
			np := fmt.Sprintf("%s.nics[%d]", p, i)
			c.str(np+".name", n.GetName(), MaxString)
			if n.GetMac() != "" {
				c.mac(np+".mac", n.GetMac())
			}
			c.str(np+".driver", n.GetDriver(), MaxString)
			c.nonNeg(np+".speedMbps", n.GetSpeedMbps())
			c.str(np+".pciAddress", n.GetPciAddress(), MaxString)
		}
	}
	c.str(p+".system.vendor", inv.GetSystem().GetVendor(), MaxString)
	c.str(p+".system.product", inv.GetSystem().GetProduct(), MaxString)
	c.str(p+".system.serial", inv.GetSystem().GetSerial(), MaxString)
	switch inv.GetFirmware() {
	case "", "UEFI", "BIOS":
	default:
		c.add(p+".firmware", "%q: want UEFI or BIOS", truncate(inv.GetFirmware()))
	}
	c.str(p+".arch", inv.GetArch(), 32)
}

// ValidateAgentStatus checks an AgentStatus sent on the stream.
func ValidateAgentStatus(st *roostv1.AgentStatus) []apierror.Violation {
	c := &fieldChecker{}
	validateInventory(c, "status.inventory", st.GetInventory())
	c.nonNeg("status.bootedRevision", st.GetBootedRevision())
	c.nonNeg("status.appliedGeneration", st.GetAppliedGeneration())
	if n := len(st.GetConditions()); n > MaxConditions {
		c.add("status.conditions", "has %d entries; at most %d allowed", n, MaxConditions)
	} else {
		for i, cd := range st.GetConditions() {
			cp := fmt.Sprintf("status.conditions[%d]", i)
			if cd.GetType() == "" {
				c.add(cp+".type", "is required")
			}
			c.str(cp+".type", cd.GetType(), 64)
			switch cd.GetStatus() {
			case "True", "False", "Unknown":
			default:
				c.add(cp+".status", "%q: want True, False or Unknown", truncate(cd.GetStatus()))
			}
			c.str(cp+".reason", cd.GetReason(), 128)
			c.str(cp+".message", cd.GetMessage(), MaxMessage)
		}
	}
	if n := len(st.GetFailedRevisions()); n > MaxConditions {
		c.add("status.failedRevisions", "has %d entries; at most %d allowed", n, MaxConditions)
	} else {
		for i, f := range st.GetFailedRevisions() {
			fp := fmt.Sprintf("status.failedRevisions[%d]", i)
			if f.GetNumber() < 1 {
				c.add(fp+".number", "must be ≥ 1, got %d", f.GetNumber())
			}
			c.str(fp+".reason", f.GetReason(), MaxMessage)
		}
	}
	return c.vs
}

func truncate(s string) string {
	if len(s) > 32 {
		return s[:32] + "…"
	}
	return s
}
