package imagebuilder

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"

	agentconfig "github.com/roostfleet/roost/agent/config"
	"github.com/roostfleet/roost/imagebuilder/enrollconfig"
	"github.com/roostfleet/roost/imagebuilder/iso"
	"github.com/roostfleet/roost/imagebuilder/sysext"
)

// ExtensionsDir is where an enrollment image's system extensions are
// unpacked (EXTENSION.raw, from the config initrd): systemd-sysext merges
// the images it finds there into /usr and /opt before sysinit.target
// (systemd-sysext(8)), so the OS image itself needs nothing of Roost's.
const ExtensionsDir = enrollconfig.ExtensionsDir

// AgentExtension is the name of the extension that ships
// /usr/bin/roost-agent (hub/state.AgentExtension).
const AgentExtension = "roost-agent"

// ErrNoAgent: the image would boot an OS without roost-agent: neither an
// --extension roost-agent nor a release whose components list it.
var ErrNoAgent = errors.New("no roost-agent in the image")

// loadedExtension is an extension image checked for an enrollment image.
type loadedExtension struct {
	info *sysext.Info
	data []byte
}

// loadExtensions reads and checks the extension images at paths (.raw
// files from roost-image sysext): each a valid system extension for
// x86-64 or any architecture (sysext.Validate), together mergeable (no
// path shipped twice, no name given twice: sysext.CheckSet) and, when
// releaseKeys (PEM ed25519) are given, signed by one of them (its
// <raw>.manifest.json and .sig beside it), as the hub and the agent check
// an extension. It returns the files to unpack, ExtensionsDir/NAME.raw
// (mode 0644), sorted by name, and the name → version of each. Errors
// name the file and say what to fix.
func loadExtensions(paths, releaseKeys []string) ([]iso.CPIOFile, map[string]string, error) {
	var pubs []ed25519.PublicKey
	for i, k := range releaseKeys {
		pub, err := agentconfig.ParseReleaseKey(k)
		if err != nil {
			return nil, nil, fmt.Errorf("release key %d: %w", i+1, err)
		}
		pubs = append(pubs, pub)
	}
	var exts []loadedExtension
	var infos []*sysext.Info
	for _, p := range paths {
		info, err := sysext.Inspect(p)
		if err != nil {
			return nil, nil, fmt.Errorf("extension %s: %w", p, err)
		}
		if err := sysext.Validate(info, sysext.Want{}); err != nil {
			return nil, nil, fmt.Errorf("extension %s: %w", p, err)
		}
		if len(pubs) > 0 {
			if err := verifyExtension(p, pubs); err != nil {
				return nil, nil, err
			}
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return nil, nil, fmt.Errorf("extension %s: %w", p, err)
		}
		infos = append(infos, info)
		exts = append(exts, loadedExtension{info: info, data: data})
	}
	if err := sysext.CheckSet(infos); err != nil {
		return nil, nil, fmt.Errorf("extensions: %w", err)
	}
	sort.Slice(exts, func(i, j int) bool { return exts[i].info.Name < exts[j].info.Name })
	files := make([]iso.CPIOFile, 0, len(exts))
	versions := map[string]string{}
	for _, x := range exts {
		files = append(files, enrollconfig.Extension(x.info.Name, x.data))
		versions[x.info.Name] = x.info.Version
	}
	return files, versions, nil
}

// verifyExtension checks that one of pubs signed the extension at p
// (sysext.LoadBundle: its manifest and signature beside it).
func verifyExtension(p string, pubs []ed25519.PublicKey) error {
	var errs []string
	for _, pub := range pubs {
		_, err := sysext.LoadBundle(p, pub)
		if err == nil {
			return nil
		}
		errs = append(errs, err.Error())
	}
	return fmt.Errorf("extension %s is not signed by a --release-key (the agent would not trust what the hub later pins either): %s; "+
		"sign it with roost-image sysext --key KEY", p, strings.Join(errs, "; "))
}

// checkAgent returns ErrNoAgent, with what to do, unless the image has an
// agent: an extension named AgentExtension among versions, or a release
// whose components list roost-agent (an OS image with the agent baked in).
// Without a release bundle (--kernel and --initrd), or with a release that
// lists no components at all, nothing is known of the OS and nothing is
// refused.
func checkAgent(versions, components map[string]string) error {
	if _, ok := versions[AgentExtension]; ok || len(components) == 0 {
		return nil
	}
	if _, ok := components[AgentExtension]; ok {
		return nil
	}
	return fmt.Errorf("%w: the release's components do not list roost-agent and no --extension ships it, so the server would boot without an agent. "+
		"Build the agent extension (roost-image sysext --name roost-agent --version V --file bin/roost-agent:/usr/bin/roost-agent --key KEY -o roost-agent-V.raw) "+
		"and pass --extension roost-agent-V.raw; push the same file to the hub (roostctl extension push) so that installed Machines run it too", ErrNoAgent)
}
