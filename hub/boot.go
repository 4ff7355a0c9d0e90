package hub

import (
	"errors"
	"net"
	"net/http"
	"time"

	"github.com/roostfleet/roost/hub/netboot"
)

// serveBoot serves network boot over plain HTTP on ln (hub/netboot): the
// iPXE script of a network boot URL, the kernel and initrd of its release
// and the config initrd with its enrollment token. iPXE ROMs trust no
// private CA, so it is HTTP: the URLs are the credentials and expire.
// The handler only reads the state.
func (h *Hub) serveBoot(ln net.Listener) {
	mux := http.NewServeMux()
	(&netboot.Handler{State: h.fsm, Open: h.blobs.Open, Log: h.log}).Register(mux)
	h.boot = &http.Server{Handler: mux, ReadHeaderTimeout: handshakeTimeout(h.opts), IdleTimeout: 2 * time.Minute}
	go h.boot.Serve(ln)
}

// netbootURL signs g with the hub CA key and returns the boot URL at
// Options.BootURL (default http://BOOT-ADDR).
func (h *Hub) netbootURL(g netboot.Grant) (string, error) {
	ca := h.fsm.CA()
	if ca == nil {
		return "", errors.New("the hub CA is not replicated yet")
	}
	signed, err := netboot.Sign(netboot.Key(ca.GetPrivateKeyPem()), g)
	if err != nil {
		return "", err
	}
	base := h.opts.BootURL
	if base == "" {
		if h.bootLn == nil {
			return "", errors.New("this member serves no network boot (roost-hub --boot-addr)")
		}
		base = "http://" + h.bootLn.Addr().String()
	}
	return netboot.URL(base, signed), nil
}
