package imagebuilder

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/coreos/ignition/v2/config/v3_3"
	"github.com/coreos/ignition/v2/config/v3_3/types"
	"github.com/vincent-petithory/dataurl"

	"github.com/roostfleet/roost/imagebuilder/ignition"
	"github.com/roostfleet/roost/imagebuilder/iso"
)

// Report is what Inspect finds in an image.
type Report struct {
	Path    string
	Format  iso.Format
	Size    int64
	Boot    []iso.BootEntry
	Files   []iso.Entry
	Info    *Info
	Cmdline string
	// Config is the embedded Ignition config with secrets masked.
	Config *types.Config
	// AgentConfig is agent.yaml with the token secret masked.
	AgentConfig string
	Expired     bool
}

var tokenRE = regexp.MustCompile(`\b([a-z0-9]{6})\.[a-z0-9]{16}\b`)

// MaskToken hides the secret half of enrollment tokens in s.
func MaskToken(s string) string {
	return tokenRE.ReplaceAllString(s, "$1.****************")
}

// MaskSSHKey keeps a key's type and comment.
func MaskSSHKey(k string) string {
	f := strings.Fields(k)
	if len(f) < 2 {
		return "****"
	}
	body := f[1]
	if len(body) > 12 {
		body = body[:12]
	}
	f[1] = body + "…(masked)"
	return strings.Join(f, " ")
}

// Inspect reads an image back: boot entries, files, metadata and the
// embedded config with secrets masked.
func Inspect(p string, now time.Time) (*Report, error) {
	st, err := os.Stat(p)
	if err != nil {
		return nil, err
	}
	im, err := iso.Open(p)
	if err != nil {
		return nil, err
	}
	defer im.Close()
	r := &Report{Path: p, Format: im.Format, Size: st.Size()}
	if r.Files, err = im.List(); err != nil {
		return nil, err
	}
	if r.Boot, err = im.BootEntries(); err != nil {
		return nil, err
	}
	if data, err := im.ReadFile(InfoPath); err == nil {
		var info Info
		if err := json.Unmarshal(data, &info); err != nil {
			return nil, fmt.Errorf("%s: %w", InfoPath, err)
		}
		r.Info = &info
		r.Cmdline = info.KernelCmdline
		if info.TokenExpires != nil && !info.TokenExpires.After(now) {
			r.Expired = true
		}
	}
	cpio, err := im.ReadFile(iso.ConfigInitrd)
	if err != nil {
		return nil, fmt.Errorf("no embedded config: %w", err)
	}
	files, err := iso.ReadCPIO(cpio)
	if err != nil {
		return nil, err
	}
	raw, ok := files[strings.TrimPrefix(iso.ConfigPath, "/")]
	if !ok {
		return nil, fmt.Errorf("%s holds no %s", iso.ConfigInitrd, iso.ConfigPath)
	}
	cfg, _, err := v3_3.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("embedded config: %w", err)
	}
	for i := range cfg.Storage.Files {
		f := &cfg.Storage.Files[i]
		if f.Contents.Source == nil || !strings.HasPrefix(*f.Contents.Source, "data:") {
			continue
		}
		du, err := dataurl.DecodeString(*f.Contents.Source)
		if err != nil {
			continue
		}
		text := MaskToken(string(du.Data))
		if f.Path == ignition.AgentConfigPath {
			r.AgentConfig = text
		}
		s := "data:," + url.PathEscape(text)
		f.Contents.Source = &s
	}
	for i := range cfg.Passwd.Users {
		for j, k := range cfg.Passwd.Users[i].SSHAuthorizedKeys {
			cfg.Passwd.Users[i].SSHAuthorizedKeys[j] = types.SSHAuthorizedKey(MaskSSHKey(string(k)))
		}
		if cfg.Passwd.Users[i].PasswordHash != nil {
			m := "****"
			cfg.Passwd.Users[i].PasswordHash = &m
		}
	}
	r.Config = &cfg
	return r, nil
}

// Write prints the report for people.
func (r *Report) Write(w io.Writer, now time.Time) error {
	fmt.Fprintf(w, "Image:     %s (%s, %.1f MiB)\n", r.Path, r.Format, float64(r.Size)/(1<<20))
	if r.Info != nil {
		if r.Info.Release != "" {
			fmt.Fprintf(w, "Release:   %s %s\n", r.Info.ReleaseName, r.Info.Release)
			for _, k := range slices.Sorted(maps.Keys(r.Info.Components)) {
				fmt.Fprintf(w, "           %s %s\n", k, r.Info.Components[k])
			}
		} else {
			fmt.Fprintf(w, "Release:   (none: kernel and initrd given directly)\n")
		}
		if len(r.Info.Extensions) > 0 {
			label := "Extensions:"
			for _, k := range slices.Sorted(maps.Keys(r.Info.Extensions)) {
				fmt.Fprintf(w, "%-11s%s %s\n", label, k, r.Info.Extensions[k])
				label = ""
			}
		}
		fmt.Fprintf(w, "Hubs:      %s\n", strings.Join(r.Info.Hubs, ", "))
		switch {
		case r.Info.TokenExpires == nil:
			fmt.Fprintf(w, "Token:     %s.**************** (expiry unknown)\n", r.Info.TokenID)
		case r.Expired:
			fmt.Fprintf(w, "Token:     %s.**************** EXPIRED at %s\n", r.Info.TokenID, r.Info.TokenExpires.Format(time.RFC3339))
		default:
			fmt.Fprintf(w, "Token:     %s.**************** expires %s (in %s)\n", r.Info.TokenID, r.Info.TokenExpires.Format(time.RFC3339), r.Info.TokenExpires.Sub(now).Round(time.Minute))
		}
		fmt.Fprintf(w, "Cmdline:   %s\n", r.Cmdline)
	}
	fmt.Fprintf(w, "Boot entries:\n")
	if len(r.Boot) == 0 {
		fmt.Fprintf(w, "  UEFI  /EFI/BOOT/BOOTX64.EFI on the EFI System Partition (raw disk image)\n")
	}
	for _, b := range r.Boot {
		extra := ""
		if b.BootTable {
			extra = ", boot information table"
		}
		fmt.Fprintf(w, "  %-4s  %-26s load size %d sectors%s\n", b.Platform, b.BootFile, b.LoadSize, extra)
	}
	fmt.Fprintf(w, "Files:\n")
	for _, f := range r.Files {
		if f.Dir {
			continue
		}
		fmt.Fprintf(w, "  %-28s %12d\n", f.Path, f.Size)
	}
	if r.AgentConfig != "" {
		fmt.Fprintf(w, "Agent config (%s, token masked):\n", ignition.AgentConfigPath)
		for _, l := range strings.Split(strings.TrimRight(r.AgentConfig, "\n"), "\n") {
			fmt.Fprintf(w, "  %s\n", l)
		}
	}
	if r.Config != nil {
		fmt.Fprintf(w, "Ignition config (%s in %s, secrets masked):\n", iso.ConfigPath, iso.ConfigInitrd)
		data, err := json.MarshalIndent(r.Config, "  ", "  ")
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "  %s\n", data)
	}
	return nil
}
