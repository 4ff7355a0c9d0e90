package netboot

import (
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/roostfleet/roost/hub/ca"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

var t0 = time.Date(2026, 12, 3, 3, 0, 0, 0, time.UTC)

func TestGrantSignVerify(t *testing.T) {
	key := Key([]byte("-----BEGIN PRIVATE KEY-----\nca key\n-----END PRIVATE KEY-----\n"))
	for _, g := range []Grant{
		{TokenID: "abc123", Release: "v2026-11-0", Expires: t0.Add(24 * time.Hour)},
		{TokenID: "abc123", Channel: "stable", Expires: t0.Add(time.Hour)},
	} {
		s, err := Sign(key, g)
		if err != nil {
			t.Fatal(err)
		}
		got, err := Verify(key, s, t0)
		if err != nil || got != g {
			t.Fatalf("Verify(Sign(%+v)) = %+v, %v", g, got, err)
		}
		if _, err := Verify(key, s, g.Expires); !errors.Is(err, ErrExpired) {
			t.Errorf("at expiry: %v, want ErrExpired", err)
		}
		if _, err := Verify(Key([]byte("another CA")), s, t0); !errors.Is(err, ErrBadSignature) {
			t.Errorf("under another CA: %v, want ErrBadSignature", err)
		}
		p := strings.Split(s, ".")
		for i, alt := range []string{"9999999999", "zzz999", "c-beta", ""} {
			if alt == "" {
				continue
			}
			q := append([]string(nil), p...)
			q[i] = alt
			if _, err := Verify(key, strings.Join(q, "."), t0); !errors.Is(err, ErrBadSignature) {
				t.Errorf("part %d changed to %q: %v, want ErrBadSignature", i, alt, err)
			}
		}
	}
	for _, bad := range []string{"", "x", "1.abc123.r-v1", "1.abc123.x-v1.AAAAAAAAAAAAAAAAAAAAAA", "1.ABC.r-v1.AAAAAAAAAAAAAAAAAAAAAA", "one.abc123.r-v1.AAAAAAAAAAAAAAAAAAAAAA"} {
		if _, err := Verify(key, bad, t0); !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrBadSignature) {
			t.Errorf("Verify(%q) = %v, want ErrMalformed", bad, err)
		}
	}
	if _, err := Verify(key, "1.abc123.x-v1.AAAAAAAAAAAAAAAAAAAAAA", t0); err == nil {
		t.Error("an unknown selector verified")
	}
	for _, g := range []Grant{{TokenID: "abc123"}, {TokenID: "abc123", Release: "v1", Channel: "stable"}, {TokenID: "ABC.1", Release: "v1"}, {TokenID: "abc123", Channel: "a.b"}} {
		if _, err := Sign(key, g); err == nil {
			t.Errorf("Sign(%+v) succeeded", g)
		}
	}
}

func TestTokenIsDerivedFromItsName(t *testing.T) {
	c, err := ca.New("test", t0)
	if err != nil {
		t.Fatal(err)
	}
	a, err := ca.Load(c)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := Token(a, "abc123")
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^abc123\.[a-z0-9]{16}$`).MatchString(tok) {
		t.Fatalf("token %q", tok)
	}
	again, _ := Token(a, "abc123")
	other, _ := Token(a, "abc124")
	if again != tok || other[7:] == tok[7:] {
		t.Errorf("Token: %q, again %q, for another id %q: want the same secret for the same id only", tok, again, other)
	}
	c2, _ := ca.New("test", t0)
	a2, _ := ca.Load(c2)
	if under, _ := Token(a2, "abc123"); under == tok {
		t.Error("another CA derived the same secret")
	}
}

func TestScript(t *testing.T) {
	s := Script{Title: "v2026-11-0 2026.11.0", Kernel: "http://h:8080/boot/G/D1/kernel", Initrd: "http://h:8080/boot/G/D2/initrd",
		Config: "http://h:8080/boot/G/D3/config.img", Args: "console=ttyS0 flatcar.first_boot=1"}
	want := `#!ipxe
echo Roost network enrollment: v2026-11-0 2026.11.0
kernel http://h:8080/boot/G/D1/kernel initrd=initrd initrd=config.img console=ttyS0 flatcar.first_boot=1
initrd --name initrd http://h:8080/boot/G/D2/initrd
initrd --name config.img http://h:8080/boot/G/D3/config.img
boot
`
	if got := s.String(); got != want {
		t.Errorf("script:\n%s\nwant:\n%s", got, want)
	}
	if got := (Script{Title: "a\n${x}"}).String(); strings.Contains(got, "${") || strings.Count(got, "\n") != 6 {
		t.Errorf("a title with a newline and an expansion: %q", got)
	}
}

func TestHubs(t *testing.T) {
	members := []*roostv1.HubMember{{Id: "a", ApiAddress: "127.0.0.1:7443"}, {Id: "b", ApiAddress: "10.0.0.6:7443"}, {Id: "c", ApiAddress: "[::]:7443"}, {Id: "d"}}
	got, err := Hubs(members, "10.0.2.2:8080")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(got, ",") != "10.0.2.2:7443,10.0.0.6:7443" {
		t.Errorf("Hubs = %v, want the loopback and unspecified members at the request's host, once", got)
	}
	if _, err := Hubs(members[3:], "h"); err == nil {
		t.Error("no API address: no error")
	}
}

func TestZeroPadded(t *testing.T) {
	z := zeroPadded{r: strings.NewReader("abcdefg"), size: 7}
	for _, c := range []struct {
		off  int64
		n    int
		want string
	}{{0, 8, "abcdefg\x00"}, {5, 3, "fg\x00"}, {7, 1, "\x00"}, {2, 2, "cd"}} {
		p := make([]byte, c.n)
		for i := range p {
			p[i] = 'x'
		}
		n, err := z.ReadAt(p, c.off)
		if err != nil || string(p[:n]) != c.want {
			t.Errorf("ReadAt(%d bytes at %d) = %q, %v; want %q", c.n, c.off, p[:n], err, c.want)
		}
	}
}
