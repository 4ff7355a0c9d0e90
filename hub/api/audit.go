package api

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/roostfleet/roost/apierror"
	"github.com/roostfleet/roost/hub/ca"
	"github.com/roostfleet/roost/internal/tlsconfig"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// The audit log: one JSON line (AuditEntry) per call of a person that
// changes something or reads a secret (access.audited), written on the
// member that first received the call. A follower forwarding the call to
// the leader records it with the leader's outcome; the leader does not
// record it again (forwarded calls carry a marker), so every call appears
// once, with its original caller.

// AuditEntry is one line of the audit log.
type AuditEntry struct {
	// Time is when the call ended (UTC).
	Time time.Time `json:"time"`
	// Member is the hub member that received the call.
	Member string `json:"member"`
	// Caller and Role name the caller's certificate (CN and short role);
	// empty without a certificate.
	Caller string `json:"caller"`
	Role   string `json:"role"`
	// Source is the caller's address (host:port).
	Source string `json:"source,omitempty"`
	// Method is the full gRPC method name.
	Method string `json:"method"`
	// Kind and Name are the request's kind and name fields, when it has
	// them.
	Kind string `json:"kind,omitempty"`
	Name string `json:"name,omitempty"`
	// RequestID is the client's request ID.
	RequestID string `json:"requestId,omitempty"`
	// Code is the call's outcome: the gRPC code name ("OK",
	// "PermissionDenied", …).
	Code string `json:"code"`
	// Message is the error message of a failed call.
	Message string `json:"message,omitempty"`
}

// readVerbs are the verbs of calls that change nothing.
var readVerbs = map[string]bool{"get": true, "list": true, "watch": true, "whoami": true, "check": true}

// audited says whether calls of a are recorded: people's calls that
// change something or read a secret.
func (a access) audited() bool {
	return a.kind != "" && (a.secret || !readVerbs[a.verbs[0]])
}

// auditor writes audit entries; nil writes nothing.
type auditor struct {
	member string
	w      io.Writer
	now    func() time.Time
}

// record writes the entry of one call of method that ended with err;
// req is the unary request (nil for streams).
func (au *auditor) record(ctx context.Context, method string, req any, err error) {
	if au == nil || au.w == nil || !accessTable[method].audited() {
		return
	}
	c, peerRole := peerCaller(ctx)
	if peerRole == ca.RoleMember && isForwarded(ctx) {
		return // recorded by the member that forwarded it
	}
	e := AuditEntry{Time: au.now().UTC(), Member: au.member, Caller: c.Name, Role: tlsconfig.RoleName(c.Role), Method: method,
		RequestID: requestID(ctx), Code: status.Code(err).String()}
	if err != nil {
		e.Message = status.Convert(err).Message()
	}
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		e.Source = p.Addr.String()
	}
	if m, ok := req.(proto.Message); ok {
		e.Kind, e.Name = stringField(m, "kind"), stringField(m, "name")
		if srv := stringField(m, "server"); e.Name == "" && srv != "" {
			e.Kind, e.Name = "Server", srv
		}
	}
	line, merr := json.Marshal(e)
	if merr != nil {
		return
	}
	_, _ = au.w.Write(append(line, '\n')) // one Write per line: writers serialize them
}

// stringField is m's top-level string field name, or "".
func stringField(m proto.Message, name string) string {
	r := m.ProtoReflect()
	fd := r.Descriptor().Fields().ByName(protoreflect.Name(name))
	if fd == nil || fd.Kind() != protoreflect.StringKind || fd.IsList() {
		return ""
	}
	return r.Get(fd).String()
}

func (au *auditor) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	resp, err := handler(ctx, req)
	au.record(ctx, info.FullMethod, req, err)
	return resp, err
}

func (au *auditor) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	if !info.IsClientStream {
		return au.serverStream(srv, ss, info, handler)
	}
	err := handler(srv, ss)
	au.record(ss.Context(), info.FullMethod, nil, err)
	return err
}

// serverStream records a server-streaming call with its one request,
// which names what it reads (e.g. the Server of ReadServerLogs). Kept out
// of stream's frame (noinline), which sits under every agent's stream for
// its whole life.
//
//go:noinline
func (au *auditor) serverStream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	fs := &firstRecv{ServerStream: ss}
	err := handler(srv, fs)
	au.record(ss.Context(), info.FullMethod, fs.first, err)
	return err
}

// firstRecv keeps the first message received on a server stream.
type firstRecv struct {
	grpc.ServerStream
	first any
}

func (f *firstRecv) RecvMsg(m any) error {
	err := f.ServerStream.RecvMsg(m)
	if err == nil && f.first == nil {
		f.first = m
	}
	return err
}

// defaultAuditLimit is ReadAudit's limit when the request gives none.
const defaultAuditLimit = 1000

// ReadAudit returns this member's audit entries (Config.AuditPath and its
// rotated files), oldest first, filtered by since, user and kind, the
// newest limit of them. Errors: FailedPrecondition (no audit log on this
// member).
func (s *Server) ReadAudit(ctx context.Context, req *roostv1.ReadAuditRequest) (*roostv1.ReadAuditResponse, error) {
	if s.auditPath == "" {
		return nil, apierror.FailedPrecondition("member %s keeps no audit log", s.audit.member)
	}
	limit := int(req.GetLimit())
	if limit <= 0 {
		limit = defaultAuditLimit
	}
	// lumberjack names rotated files NAME-TIME.EXT, which sort by time.
	ext := filepath.Ext(s.auditPath)
	files, _ := filepath.Glob(strings.TrimSuffix(s.auditPath, ext) + "-*" + ext)
	sort.Strings(files)
	files = append(files, s.auditPath)
	kind := normalKind(req.GetKind())
	var out []string
	for _, name := range files {
		f, err := os.Open(name)
		if err != nil {
			continue // rotated away meanwhile, or not written yet
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			var e AuditEntry
			if json.Unmarshal(sc.Bytes(), &e) != nil {
				continue
			}
			if req.GetSince() != nil && e.Time.Before(req.GetSince().AsTime()) ||
				req.GetUser() != "" && e.Caller != req.GetUser() ||
				kind != "" && normalKind(e.Kind) != kind && accessTable[e.Method].kind != kind {
				continue
			}
			out = append(out, sc.Text())
			if len(out) > limit {
				out = out[1:]
			}
		}
		f.Close()
	}
	return &roostv1.ReadAuditResponse{Member: s.audit.member, Entries: out}, nil
}
