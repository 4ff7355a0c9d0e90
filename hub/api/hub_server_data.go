package api

import (
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/roostfleet/roost/apierror"
	"github.com/roostfleet/roost/hub/agentconn"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// A Server's logs and support bundle (ReadServerLogs,
// CollectServerBundle): the member holding the agent's stream asks the
// agent on it (agentconn.Registry.OpenData) and passes the chunks on to
// the caller, granting the agent one more chunk for each chunk the caller
// took, so the hub holds at most agentconn.DataWindow chunks per request
// however slow the caller reads. A member without the agent's stream asks
// the other members in turn with the call forwarded (the caller's identity
// passed on); a member asked that way answers reasonAgentElsewhere when it
// does not hold the stream either.

// Bounds of the calls.
const (
	// MaxServerDataBytes is the largest max_bytes, and the default.
	MaxServerDataBytes = 64 << 20
	// maxLogUnits bounds ReadServerLogsRequest.units.
	maxLogUnits = 32
	// minLogBoot is the oldest boot ReadServerLogsRequest.boot may name.
	minLogBoot = -100
	// maxLogLines bounds ReadServerLogsRequest.lines.
	maxLogLines = 1_000_000
	// agentAckTimeout is how long the agent has to acknowledge a request
	// (an agent that does not know data requests never does).
	agentAckTimeout = 30 * time.Second
)

// reasonAgentElsewhere: the member asked does not hold the agent's stream.
const reasonAgentElsewhere = "AGENT_NOT_CONNECTED_HERE"

// unitName is what a unit name (or journalctl -u pattern) may hold.
var unitName = regexp.MustCompile(`^[A-Za-z0-9:_.@\\*?\[\]-]{1,256}$`)

// ValidateReadServerLogs returns the problems of a ReadServerLogs request.
func ValidateReadServerLogs(req *roostv1.ReadServerLogsRequest) []apierror.Violation {
	var vs []apierror.Violation
	add := func(field, msg, hint string) {
		vs = append(vs, apierror.Violation{Field: field, Message: msg, Hint: hint})
	}
	if req.GetServer() == "" {
		add("server", "is required", "name the Server, e.g. roostctl server logs NAME")
	}
	if len(req.GetUnits()) > maxLogUnits {
		add("units", fmt.Sprintf("names %d units, more than %d", len(req.GetUnits()), maxLogUnits), "read fewer units at a time")
	}
	for i, u := range req.GetUnits() {
		if !unitName.MatchString(u) || u[0] == '-' {
			add(fmt.Sprintf("units[%d]", i), fmt.Sprintf("%q is not a systemd unit name", u), "e.g. kubelet or kubelet.service")
		}
	}
	if req.GetSince() != nil && req.GetSinceAgo() != nil {
		add("sinceAgo", "is set together with since", "give one of since and sinceAgo")
	}
	if req.GetSince() != nil && !req.GetSince().IsValid() {
		add("since", "is not a valid time", "")
	}
	if d := req.GetSinceAgo(); d != nil && (!d.IsValid() || d.AsDuration() < 0) {
		add("sinceAgo", "is negative or invalid", "e.g. 1h for the last hour")
	}
	if b := req.GetBoot(); b > 0 || b < minLogBoot {
		add("boot", fmt.Sprintf("%d is not a boot", b), fmt.Sprintf("0 is this boot, -1 the one before, down to %d", minLogBoot))
	}
	if req.GetFollow() && req.GetBoot() != 0 {
		add("follow", "follows this boot only", "leave out --boot, or --follow")
	}
	if n := req.GetLines(); n < 0 || n > maxLogLines {
		add("lines", fmt.Sprintf("%d is out of range", n), fmt.Sprintf("0 (all) to %d", maxLogLines))
	}
	if m := req.GetMaxBytes(); m < 0 || m > MaxServerDataBytes {
		add("maxBytes", fmt.Sprintf("%d is out of range", m), fmt.Sprintf("0 (%d) up to %d", MaxServerDataBytes, MaxServerDataBytes))
	}
	return vs
}

// ReadServerLogs streams a Server's journal (see HubService in hub.proto).
func (s *Server) ReadServerLogs(req *roostv1.ReadServerLogsRequest, stream grpc.ServerStreamingServer[roostv1.ServerDataChunk]) error {
	if vs := ValidateReadServerLogs(req); len(vs) > 0 {
		return apierror.Invalid("invalid log request", vs...)
	}
	maxBytes := req.GetMaxBytes()
	if maxBytes == 0 {
		maxBytes = MaxServerDataBytes
	}
	ask := func(id string) *roostv1.HubMessage {
		return &roostv1.HubMessage{Message: &roostv1.HubMessage_ReadJournal{ReadJournal: &roostv1.ReadJournal{
			RequestId: id, Units: req.GetUnits(), Since: req.GetSince(), SinceAgo: req.GetSinceAgo(), Boot: req.GetBoot(),
			Lines: req.GetLines(), Follow: req.GetFollow(), Json: req.GetJson(), MaxBytes: maxBytes,
			ChunkBytes: agentconn.DataChunkBytes, Window: agentconn.DataWindow,
		}}}
	}
	return s.serverData(stream.Context(), req.GetServer(), "logs", ask, stream.Send,
		func(c *grpc.ClientConn, fctx context.Context) (func() (*roostv1.ServerDataChunk, error), error) {
			cs, err := roostv1.NewHubServiceClient(c).ReadServerLogs(fctx, req)
			if err != nil {
				return nil, err
			}
			return cs.Recv, nil
		})
}

// CollectServerBundle streams a Server's support bundle (see HubService
// in hub.proto).
func (s *Server) CollectServerBundle(req *roostv1.CollectServerBundleRequest, stream grpc.ServerStreamingServer[roostv1.ServerDataChunk]) error {
	var vs []apierror.Violation
	if req.GetServer() == "" {
		vs = append(vs, apierror.Violation{Field: "server", Message: "is required", Hint: "name the Server, e.g. roostctl server bundle NAME -o bundle.tar.gz"})
	}
	if m := req.GetMaxBytes(); m < 0 || m > MaxServerDataBytes {
		vs = append(vs, apierror.Violation{Field: "maxBytes", Message: fmt.Sprintf("%d is out of range", m), Hint: fmt.Sprintf("0 (%d) up to %d", MaxServerDataBytes, MaxServerDataBytes)})
	}
	if len(vs) > 0 {
		return apierror.Invalid("invalid bundle request", vs...)
	}
	maxBytes := req.GetMaxBytes()
	if maxBytes == 0 {
		maxBytes = MaxServerDataBytes
	}
	ask := func(id string) *roostv1.HubMessage {
		return &roostv1.HubMessage{Message: &roostv1.HubMessage_CollectBundle{CollectBundle: &roostv1.CollectBundle{
			RequestId: id, MaxBytes: maxBytes, ChunkBytes: agentconn.DataChunkBytes, Window: agentconn.DataWindow,
		}}}
	}
	return s.serverData(stream.Context(), req.GetServer(), "bundle", ask, stream.Send,
		func(c *grpc.ClientConn, fctx context.Context) (func() (*roostv1.ServerDataChunk, error), error) {
			cs, err := roostv1.NewHubServiceClient(c).CollectServerBundle(fctx, req)
			if err != nil {
				return nil, err
			}
			return cs.Recv, nil
		})
}

// serverData runs a data request (what: "logs" or "bundle") to the agent
// of Server name: here when this member holds its stream, else on the
// member that does (remote opens the same call there).
func (s *Server) serverData(ctx context.Context, name, what string, ask func(id string) *roostv1.HubMessage,
	send func(*roostv1.ServerDataChunk) error,
	remote func(*grpc.ClientConn, context.Context) (func() (*roostv1.ServerDataChunk, error), error)) error {
	if _, ok := s.fsm.ServerState(name); !ok {
		return apierror.NotFound("server", name)
	}
	d, err := s.agents.OpenData(name)
	switch {
	case err == nil:
		return s.runData(ctx, name, what, d, ask(d.ID()), send)
	case errors.Is(err, agentconn.ErrTooManyRequests):
		return &apierror.Error{Code: codes.ResourceExhausted, Message: fmt.Sprintf("server %s: %v", name, err)}
	}
	if isForwarded(ctx) {
		return &apierror.Error{Code: codes.FailedPrecondition, Reason: reasonAgentElsewhere,
			Message: fmt.Sprintf("the agent of server %s is not connected to member %s", name, s.memberID())}
	}
	var unreachable, older []string
	for _, m := range s.fsm.Members() {
		if m.GetId() == s.memberID() || m.GetApiAddress() == "" {
			continue
		}
		c, err := s.peerConn(m.GetApiAddress())
		if err != nil {
			unreachable = append(unreachable, m.GetId())
			continue
		}
		fctx, cancel := context.WithCancel(withCaller(ctx, metadata.AppendToOutgoingContext(ctx, forwardedKey, s.memberID())))
		started, err := s.relayData(fctx, c, send, remote)
		cancel()
		switch {
		case err == nil || started:
			return err
		case apierror.ReasonOf(err) == reasonAgentElsewhere:
			continue
		case apierror.Code(err) == codes.Unavailable && ctx.Err() == nil:
			unreachable = append(unreachable, m.GetId())
			continue
		case olderMember(err):
			older = append(older, m.GetId())
			continue
		}
		return err
	}
	msg := fmt.Sprintf("the agent of server %s is connected to no hub member: the Server is off or cannot reach the hub (roostctl get server %s shows when it was last seen)", name, name)
	if len(unreachable) > 0 {
		msg += fmt.Sprintf("; members %v could not be asked", unreachable)
	}
	if len(older) > 0 {
		msg += fmt.Sprintf("; members %v run a roost-hub without server logs (upgrade them)", older)
	}
	return apierror.FailedPrecondition("%s", msg)
}

// olderMember says whether err is how a member whose roost-hub predates
// these calls refuses them: its access table lacks them, or it does not
// serve them.
func olderMember(err error) bool {
	switch apierror.Code(err) {
	case codes.Unimplemented:
		return true
	case codes.PermissionDenied:
		return strings.Contains(status.Convert(err).Message(), "is not in the hub's access table")
	}
	return false
}

// relayData runs the call on another member (remote) and passes its
// chunks to send; started says whether a chunk reached the caller (then
// no other member may be tried).
func (s *Server) relayData(fctx context.Context, c *grpc.ClientConn, send func(*roostv1.ServerDataChunk) error,
	remote func(*grpc.ClientConn, context.Context) (func() (*roostv1.ServerDataChunk, error), error)) (started bool, err error) {
	recv, err := remote(c, fctx)
	if err != nil {
		return false, err
	}
	for {
		ch, err := recv()
		if errors.Is(err, io.EOF) {
			return started, nil
		}
		if err != nil {
			return started, err
		}
		started = true
		if err := send(ch); err != nil {
			return started, err
		}
	}
}

// runData runs data request d on the agent stream this member holds: it
// sends the request, waits for the agent's acknowledgement, then passes
// each chunk to send and grants the agent one more; it cancels the
// request at the agent when the caller goes away first.
func (s *Server) runData(ctx context.Context, name, what string, d *agentconn.DataRequest, ask *roostv1.HubMessage, send func(*roostv1.ServerDataChunk) error) error {
	defer d.Close()
	st := d.Stream()
	if err := st.Send(ask); err != nil {
		return apierror.Unavailable("server %s: sending the %s request to its agent: %v; retry", name, what, err)
	}
	done := false
	defer func() {
		if !done {
			cancel := &roostv1.HubMessage{Message: &roostv1.HubMessage_DataCredit{DataCredit: &roostv1.DataCredit{RequestId: d.ID(), Cancel: true}}}
			// off the caller's path: a stalled agent stream must not hold it
			go func() { _ = st.Send(cancel) }()
		}
	}()
	ack := time.NewTimer(agentAckTimeout)
	defer ack.Stop()
	acked := false
	credit := &roostv1.HubMessage{Message: &roostv1.HubMessage_DataCredit{DataCredit: &roostv1.DataCredit{RequestId: d.ID(), Chunks: 1}}}
	for {
		select {
		case c := <-d.C():
			acked = true
			if len(c.GetData()) > 0 {
				if err := send(&roostv1.ServerDataChunk{Data: c.GetData()}); err != nil {
					return err
				}
				if err := st.Send(credit); err != nil {
					return apierror.Unavailable("server %s: the agent's stream failed: %v; retry", name, err)
				}
			}
			if !c.GetDone() {
				continue
			}
			done = true
			if c.GetError() != "" {
				return apierror.FailedPrecondition("server %s: the agent could not collect the %s: %s", name, what, c.GetError())
			}
			if c.GetTruncated() {
				return send(&roostv1.ServerDataChunk{Truncated: true})
			}
			return nil
		case <-d.Failed():
			return apierror.Unavailable("server %s: %v", name, d.Err())
		case <-ack.C:
			if !acked {
				return apierror.FailedPrecondition("the agent of server %s did not answer the %s request within %s: its roost-agent is probably older than the hub (upgrade it)", name, what, agentAckTimeout)
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
