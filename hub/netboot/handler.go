package netboot

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/time/rate"

	"github.com/roostfleet/roost/hub/ca"
	"github.com/roostfleet/roost/hub/media"
	"github.com/roostfleet/roost/hub/revisions"
	"github.com/roostfleet/roost/hub/state"
	"github.com/roostfleet/roost/imagebuilder/enrollconfig"
	"github.com/roostfleet/roost/imagebuilder/release"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// PathPrefix is where the handler is mounted: a boot URL is
// PathPrefix + GRANT/ipxe, its pieces PathPrefix + GRANT/DOWNLOAD/kernel,
// …/initrd and …/config.img, DOWNLOAD a hub/media download token.
const PathPrefix = "/boot/"

// URL is the boot URL (the iPXE script) of a signed grant at base, the
// scheme and authority servers reach the boot listener by
// ("http://10.0.0.5:8080").
func URL(base, grant string) string {
	return strings.TrimSuffix(base, "/") + PathPrefix + grant + "/ipxe"
}

// State is what the handler reads of the hub's replicated state
// (*state.FSM); it never writes.
type State interface {
	CA() *roostv1.CertificateAuthority
	Get(kind, name string) (*roostv1.Object, error)
	List(kind, selector string) ([]*roostv1.Object, uint64, error)
	Members() []*roostv1.HubMember
	TrustedKeys() []*roostv1.TrustedKey
}

// Handler serves network boot under grants.
type Handler struct {
	State State
	// Open opens the blob with the hex sha256 digest and returns its size.
	Open func(digest string) (*os.File, int64, error)
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Log gets one record per script served and per refused request
	// (the first 10, then at most one a second: refusals come from
	// anyone), with the token's name but never a grant, token or secret.
	Log *slog.Logger

	refusals rate.Sometimes
}

// Register mounts the handler on mux (GET, and HEAD with it).
func (h *Handler) Register(mux *http.ServeMux) {
	h.refusals.First, h.refusals.Interval = 10, time.Second
	mux.HandleFunc("GET "+PathPrefix+"{grant}/ipxe", h.serveScript)
	mux.HandleFunc("GET "+PathPrefix+"{grant}/{download}/kernel", h.serveBlob)
	mux.HandleFunc("GET "+PathPrefix+"{grant}/{download}/initrd", h.serveBlob)
	mux.HandleFunc("GET "+PathPrefix+"{grant}/{download}/config.img", h.serveConfig)
}

// emptyDigest is the download digest of a config initrd without an
// extension: the sha256 of nothing.
var emptyDigest = func() string { s := sha256.Sum256(nil); return hex.EncodeToString(s[:]) }()

// boot is a request whose grant and token checked out.
type boot struct {
	grant  Grant
	signed string // the grant as in the URL
	ca     *roostv1.CertificateAuthority
	token  string // "<id>.<secret>"
}

// refusal is an HTTP error with the status to answer.
type refusal struct {
	code int
	msg  string
}

func (e *refusal) Error() string { return e.msg }

func refuse(code int, format string, a ...any) error {
	return &refusal{code: code, msg: fmt.Sprintf(format, a...)}
}

func (h *Handler) now() time.Time {
	if h.Now != nil {
		return h.Now()
	}
	return time.Now()
}

// fail answers err: its status for a refusal (403 bad grant, …), else 500.
func (h *Handler) fail(w http.ResponseWriter, r *http.Request, tokenID string, err error) {
	code := http.StatusInternalServerError
	var rf *refusal
	if errors.As(err, &rf) {
		code = rf.code
	}
	if h.Log != nil {
		h.refusals.Do(func() {
			h.Log.Warn("network boot request refused", "token", tokenID, "remote", r.RemoteAddr, "status", code, "err", err)
		})
	}
	w.Header().Set("Cache-Control", "no-store")
	http.Error(w, err.Error(), code)
}

// check verifies the request's grant and that its enrollment token can
// still enroll: it exists, is a network boot token (its hash is that of
// the derived secret), is not revoked, expired or used up.
func (h *Handler) check(r *http.Request) (*boot, error) {
	c := h.State.CA()
	if c == nil {
		return nil, refuse(http.StatusServiceUnavailable, "the hub CA is not replicated to this member yet; retry")
	}
	now := h.now()
	signed := r.PathValue("grant")
	g, err := Verify(Key(c.GetPrivateKeyPem()), signed, now)
	if err != nil {
		return nil, refuse(http.StatusForbidden, "%v", err)
	}
	auth, err := ca.Load(c)
	if err != nil {
		return nil, err
	}
	tok, err := Token(auth, g.TokenID)
	if err != nil {
		return nil, err
	}
	o, err := h.State.Get("EnrollmentToken", g.TokenID)
	if err != nil {
		return nil, refuse(http.StatusForbidden, "enrollment token %s of this network boot URL does not exist (on this hub member): make a new URL with 'roostctl netboot url'", g.TokenID)
	}
	et := o.GetEnrollmentToken()
	sum := sha256.Sum256([]byte(tok))
	switch {
	case et.GetSpec().GetSecretSha256() != hex.EncodeToString(sum[:]):
		return nil, refuse(http.StatusForbidden, "enrollment token %s is not a network boot token; make a URL with 'roostctl netboot url'", g.TokenID)
	case et.GetStatus().GetRevoked():
		return nil, refuse(http.StatusForbidden, "enrollment token %s of this network boot URL was revoked; make a new URL with 'roostctl netboot url'", g.TokenID)
	case et.GetSpec().GetExpiresAt() != nil && !now.Before(et.GetSpec().GetExpiresAt().AsTime()):
		return nil, refuse(http.StatusForbidden, "enrollment token %s of this network boot URL expired; make a new URL with 'roostctl netboot url'", g.TokenID)
	case et.GetSpec().GetMaxUses() > 0 && et.GetStatus().GetUses() >= et.GetSpec().GetMaxUses():
		return nil, refuse(http.StatusForbidden, "enrollment token %s of this network boot URL is used up (%d enrollments); make a new URL with 'roostctl netboot url'", g.TokenID, et.GetStatus().GetUses())
	}
	return &boot{grant: g, signed: signed, ca: c, token: tok}, nil
}

// subject is what a download token of b for file ("kernel", "initrd" or
// "config.img") is made for: hub/media's server name, which for a BMC is
// a Server name, never holding a "/", so a BMC's token never serves here
// and a token for one file serves no other.
func (b *boot) subject(file string) string { return "netboot/" + b.grant.TokenID + "/" + file }

// release is the ImageRelease b boots: the one it names, or the newest of
// its channel now (revisions.PickRelease).
func (h *Handler) release(g Grant) (*roostv1.ImageRelease, error) {
	var rel *roostv1.ImageRelease
	if g.Release != "" {
		o, err := h.State.Get("ImageRelease", g.Release)
		if err != nil {
			return nil, refuse(http.StatusNotFound, "ImageRelease %s of this network boot URL no longer exists (roostctl image push)", g.Release)
		}
		rel = o.GetImageRelease()
	} else {
		objs, _, err := h.State.List("ImageRelease", "")
		if err != nil {
			return nil, err
		}
		if rel = revisions.PickRelease(objs, "", g.Channel); rel == nil {
			return nil, refuse(http.StatusNotFound, "no ImageRelease is promoted to channel %s (roostctl image promote VERSION %s)", g.Channel, g.Channel)
		}
	}
	if rel.GetSpec().GetKernel().GetSha256() == "" || rel.GetSpec().GetInitrd().GetSha256() == "" {
		return nil, refuse(http.StatusNotFound, "ImageRelease %s has no kernel and initrd", rel.GetMetadata().GetName())
	}
	return rel, nil
}

// agentExtension is the roost-agent extension the live OS of rel needs:
// none when rel's components list roost-agent (the OS has it), else the
// newest pushed one, as every Revision runs (state.ClassExtensionRefs). A
// release with no components at all is taken as it comes, as roost-image
// does.
func (h *Handler) agentExtension(rel *roostv1.ImageRelease) (*roostv1.Extension, error) {
	comps := rel.GetSpec().GetComponents()
	if _, ok := comps[state.AgentExtension]; ok {
		return nil, nil
	}
	objs, _, err := h.State.List("Extension", "")
	if err != nil {
		return nil, err
	}
	var all []*roostv1.Extension
	for _, o := range objs {
		all = append(all, o.GetExtension())
	}
	exts, _, err := state.ResolveExtensions(all, []string{state.AgentExtension})
	if err != nil || len(exts) == 0 {
		if len(comps) == 0 {
			return nil, nil
		}
		return nil, refuse(http.StatusConflict, "ImageRelease %s does not ship roost-agent and no roost-agent extension is pushed: "+
			"the server would boot without an agent (roostctl extension push roost-agent-V.raw)", rel.GetMetadata().GetName())
	}
	return exts[0], nil
}

// base is the scheme and authority the server reached the hub by.
func base(r *http.Request) string {
	if r.TLS != nil {
		return "https://" + r.Host
	}
	return "http://" + r.Host
}

// serveScript answers GET …/GRANT/ipxe with the iPXE script: the kernel and
// initrd of the grant's release and the config initrd, each under a
// download token good for media.DefaultTTL.
func (h *Handler) serveScript(w http.ResponseWriter, r *http.Request) {
	b, err := h.check(r)
	if err != nil {
		h.fail(w, r, "", err)
		return
	}
	rel, err := h.release(b.grant)
	if err != nil {
		h.fail(w, r, b.grant.TokenID, err)
		return
	}
	ext, err := h.agentExtension(rel)
	if err != nil {
		h.fail(w, r, b.grant.TokenID, err)
		return
	}
	var m release.Manifest
	if err := json.Unmarshal(rel.GetSpec().GetManifest(), &m); err != nil {
		h.fail(w, r, b.grant.TokenID, fmt.Errorf("ImageRelease %s: manifest: %w", rel.GetMetadata().GetName(), err))
		return
	}
	key := media.Key(b.ca.GetPrivateKeyPem())
	exp := h.now().Add(media.DefaultTTL)
	url := func(digest, file string) string {
		return base(r) + PathPrefix + b.signed + "/" + media.Token(key, b.subject(file), digest, exp) + "/" + file
	}
	configDigest := emptyDigest
	if ext != nil {
		configDigest = ext.GetSpec().GetImage().GetSha256()
	}
	s := Script{
		Title:  fmt.Sprintf("%s %s", rel.GetMetadata().GetName(), rel.GetSpec().GetVersion()),
		Kernel: url(rel.GetSpec().GetKernel().GetSha256(), "kernel"),
		Initrd: url(rel.GetSpec().GetInitrd().GetSha256(), "initrd"),
		Config: url(configDigest, "config.img"),
		Args:   strings.TrimSpace(enrollconfig.KernelArgs + " " + strings.Join(m.Cmdline, " ")),
	}
	if h.Log != nil {
		h.Log.Info("network boot script served", "token", b.grant.TokenID, "release", rel.GetMetadata().GetName(), "remote", r.RemoteAddr)
	}
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	io.WriteString(w, s.String())
}

// download checks the request's download token for file and returns its
// digest.
func (h *Handler) download(r *http.Request, b *boot, file string) (string, error) {
	digest, err := media.Verify(media.Key(b.ca.GetPrivateKeyPem()), b.subject(file), r.PathValue("download"), h.now())
	if err != nil {
		return "", refuse(http.StatusForbidden, "%v: fetch the boot script again", err)
	}
	return digest, nil
}

// serveBlob answers GET …/GRANT/DOWNLOAD/kernel and …/initrd with the
// blob the download token grants, with Range support. The initrd is
// padded with zeros to a multiple of 4 bytes: the kernel's EFI stub loads
// initrd= files back to back, and the kernel finds the config initrd's
// cpio header after the release initrd only at an offset that is a
// multiple of 4 (it skips the zeros; GRUB and a BIOS iPXE align by
// themselves).
func (h *Handler) serveBlob(w http.ResponseWriter, r *http.Request) {
	b, err := h.check(r)
	if err != nil {
		h.fail(w, r, "", err)
		return
	}
	file := r.URL.Path[strings.LastIndexByte(r.URL.Path, '/')+1:]
	digest, err := h.download(r, b, file)
	if err != nil {
		h.fail(w, r, b.grant.TokenID, err)
		return
	}
	f, size, err := h.Open(digest)
	if err != nil {
		h.fail(w, r, b.grant.TokenID, refuse(http.StatusNotFound, "artifact %s is not stored on this hub member", digest))
		return
	}
	defer f.Close()
	served := size
	if file == initrdName {
		served = (size + 3) &^ 3
	}
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Type", "application/octet-stream")
	http.ServeContent(w, r, "", time.Time{}, io.NewSectionReader(zeroPadded{r: f, size: size}, 0, served))
}

// serveConfig answers GET …/GRANT/DOWNLOAD/config.img with the config
// initrd: the agent configuration with the grant's enrollment token, the
// hub CA, the hub addresses (Hubs) and the trusted release keys, and the
// agent extension the download token names.
func (h *Handler) serveConfig(w http.ResponseWriter, r *http.Request) {
	b, err := h.check(r)
	if err != nil {
		h.fail(w, r, "", err)
		return
	}
	digest, err := h.download(r, b, configName)
	if err != nil {
		h.fail(w, r, b.grant.TokenID, err)
		return
	}
	var files []enrollconfig.File
	if digest != emptyDigest {
		if err := h.isAgentExtension(digest); err != nil {
			h.fail(w, r, b.grant.TokenID, err)
			return
		}
		data, err := h.readBlob(digest)
		if err != nil {
			h.fail(w, r, b.grant.TokenID, err)
			return
		}
		files = append(files, enrollconfig.Extension(state.AgentExtension, data))
	}
	hubs, err := Hubs(h.State.Members(), r.Host)
	if err != nil {
		h.fail(w, r, b.grant.TokenID, refuse(http.StatusServiceUnavailable, "%v", err))
		return
	}
	var keys []string
	for _, k := range h.State.TrustedKeys() {
		keys = append(keys, k.GetPublicKeyPem())
	}
	cfg, err := enrollconfig.Ignition(enrollconfig.Params{Hubs: hubs, CA: b.ca.GetCertificatePem(), Token: b.token, ReleaseKeys: keys})
	if err != nil {
		h.fail(w, r, b.grant.TokenID, err)
		return
	}
	var out bytes.Buffer
	if err := enrollconfig.WriteInitrd(&out, cfg, files, 0); err != nil {
		h.fail(w, r, b.grant.TokenID, err)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.Itoa(out.Len()))
	w.Write(out.Bytes())
}

// isAgentExtension checks that digest is the image of a roost-agent
// Extension (one may have been deleted since the script was served).
func (h *Handler) isAgentExtension(digest string) error {
	objs, _, err := h.State.List("Extension", "")
	if err != nil {
		return err
	}
	for _, o := range objs {
		if s := o.GetExtension().GetSpec(); s.GetName() == state.AgentExtension && s.GetImage().GetSha256() == digest {
			return nil
		}
	}
	return refuse(http.StatusNotFound, "the roost-agent extension of this boot was deleted: fetch the boot script again")
}

// zeroPadded reads the size bytes of r, then zeros.
type zeroPadded struct {
	r    io.ReaderAt
	size int64
}

func (z zeroPadded) ReadAt(p []byte, off int64) (int, error) {
	n := 0
	if off < z.size {
		m := min(int64(len(p)), z.size-off)
		k, err := z.r.ReadAt(p[:m], off)
		if int64(k) < m {
			return k, err
		}
		n = k
	}
	clear(p[n:])
	return len(p), nil
}

// readBlob reads the whole blob digest (an extension image, tens of MiB).
func (h *Handler) readBlob(digest string) ([]byte, error) {
	f, size, err := h.Open(digest)
	if err != nil {
		return nil, refuse(http.StatusNotFound, "artifact %s is not stored on this hub member", digest)
	}
	defer f.Close()
	data := make([]byte, size)
	if _, err := io.ReadFull(f, data); err != nil {
		return nil, fmt.Errorf("artifact %s: %w", digest, err)
	}
	return data, nil
}

// Hubs are the hub API addresses a network-booted agent enrolls with:
// every member's applied API address, in member order, where a member
// that advertises a loopback or unspecified host (127.0.0.1, 0.0.0.0, ::)
// is reached at the host the server reached the boot listener by
// (requestHost, "host" or "host:port"). Error: no member has an API
// address yet.
func Hubs(members []*roostv1.HubMember, requestHost string) ([]string, error) {
	rhost := requestHost
	if h, _, err := net.SplitHostPort(requestHost); err == nil {
		rhost = h
	}
	var out []string
	seen := map[string]bool{}
	for _, m := range members {
		host, port, err := net.SplitHostPort(m.GetApiAddress())
		if err != nil {
			continue
		}
		if ip := net.ParseIP(host); host == "" || host == "localhost" || (ip != nil && (ip.IsLoopback() || ip.IsUnspecified())) {
			host = rhost
		}
		a := net.JoinHostPort(host, port)
		if !seen[a] {
			seen[a] = true
			out = append(out, a)
		}
	}
	if len(out) == 0 {
		return nil, errors.New("no hub member has an API address applied yet; retry")
	}
	return out, nil
}
