package netprofiles_test

import (
	"net/netip"
	"testing"

	"github.com/roostfleet/roost/netprofiles"
)

func TestResolvConf(t *testing.T) {
	p := profileSpec(t, "../examples/networkprofile.yaml")
	got := netprofiles.ResolvConf(p, netip.MustParseAddr("10.0.0.53"), netip.MustParseAddr("192.0.2.53"))
	want := "# Written by Roost from the NetworkProfile.\nnameserver 192.0.2.53\nnameserver 2001:db8::53\nnameserver 10.0.0.53\nsearch example.com\n"
	if got != want {
		t.Errorf("got:\n%s\nwant:\n%s", got, want)
	}
}
