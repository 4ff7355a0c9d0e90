package raftnode

import (
	"net"
	"strings"
	"testing"
)

func TestListenBindsAndRefusesUnadvertisable(t *testing.T) {
	ln, err := Listen("127.0.0.1:0", "")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	// The port is held: a second bind fails.
	if other, err := net.Listen("tcp", ln.Addr().String()); err == nil {
		other.Close()
		t.Fatalf("%s was not bound", ln.Addr())
	}
	if ln, err := Listen("0.0.0.0:0", ""); err == nil || !strings.Contains(err.Error(), "not advertisable") {
		if ln != nil {
			ln.Close()
		}
		t.Fatalf("Listen on 0.0.0.0 without an advertised address: %v, want not advertisable", err)
	}
	ln2, err := Listen("0.0.0.0:0", "10.0.0.1:7444")
	if err != nil {
		t.Fatalf("Listen on 0.0.0.0 advertising 10.0.0.1:7444: %v", err)
	}
	ln2.Close()
}
