package api

import (
	"errors"
	"slices"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/roostfleet/roost/apierror"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

func TestValidateReadServerLogs(t *testing.T) {
	fields := func(req *roostv1.ReadServerLogsRequest) []string {
		var out []string
		for _, v := range ValidateReadServerLogs(req) {
			out = append(out, v.Field)
		}
		return out
	}
	if got := fields(&roostv1.ReadServerLogsRequest{Server: "s", Units: []string{"kubelet", "systemd-*", "getty@tty1.service"}, Boot: -100, Lines: 10, SinceAgo: durationpb.New(0)}); got != nil {
		t.Errorf("a good request: %v", got)
	}
	for _, c := range []struct {
		req  *roostv1.ReadServerLogsRequest
		want []string
	}{
		{&roostv1.ReadServerLogsRequest{}, []string{"server"}},
		{&roostv1.ReadServerLogsRequest{Server: "s", Units: []string{"ok", "--all", "a b"}}, []string{"units[1]", "units[2]"}},
		{&roostv1.ReadServerLogsRequest{Server: "s", Since: timestamppb.Now(), SinceAgo: durationpb.New(-1)}, []string{"sinceAgo", "sinceAgo"}},
		{&roostv1.ReadServerLogsRequest{Server: "s", Boot: -101, Follow: true}, []string{"boot", "follow"}},
		{&roostv1.ReadServerLogsRequest{Server: "s", Lines: -1, MaxBytes: MaxServerDataBytes + 1}, []string{"lines", "maxBytes"}},
	} {
		if got := fields(c.req); !slices.Equal(got, c.want) {
			t.Errorf("%v: fields %v, want %v", c.req, got, c.want)
		}
	}
}

// TestOlderMember: how a member without these calls refuses them.
func TestOlderMember(t *testing.T) {
	for err, want := range map[error]bool{
		status.Error(codes.Unimplemented, "unknown method ReadServerLogs"):                                           true,
		status.Error(codes.PermissionDenied, "/roost.v1.HubService/ReadServerLogs is not in the hub's access table"): true,
		status.Error(codes.PermissionDenied, `"jane" (role viewer) may not call it`):                                 false,
		apierror.FailedPrecondition("journalctl failed"):                                                             false,
		errors.New("other"): false,
	} {
		if got := olderMember(err); got != want {
			t.Errorf("olderMember(%v) = %v", err, got)
		}
	}
}
