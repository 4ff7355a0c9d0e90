package agent

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/roostfleet/roost/agent/boot"
	"github.com/roostfleet/roost/agent/fetch"
	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
	"github.com/roostfleet/roost/releasesig"
)

// fetchMaxFailures is fetch.Fetcher.MaxFailures of the host loop's
// downloads (about 15 s of backoff).
const fetchMaxFailures = 5

// fetchVerified checks the release manifest's signature with the trusted
// keys and that it lists the Revision's kernel and initrd, and each
// extension's signed manifest; then it downloads them all (resumable,
// sha256-checked) into STATE's cache.
func (a *Agent) fetchVerified(ctx context.Context, client roostv1.AgentServiceClient, spec *roostv1.RevisionSpec) (kernel, initrd string, exts []boot.Extension, err error) {
	if err := VerifyRelease(spec, a.host.TrustedKeys); err != nil {
		return "", "", nil, err
	}
	for _, x := range spec.GetExtensions() {
		if err := VerifyExtension(x, a.host.TrustedKeys); err != nil {
			return "", "", nil, err
		}
	}
	dir := filepath.Join(a.hs.stateRoot, CacheDir)
	fctx, cancel := context.WithTimeout(ctx, 30*time.Minute)
	defer cancel()
	// The client is one member's: when it is gone for good the fetch gives
	// up after a few attempts, and the host loop's next try dials the
	// member the agent's stream moved to (the partial download resumes).
	// Retrying on a dead member until the timeout stalled a Server's
	// rollout for 30 minutes after its member was killed (make scale).
	f := &fetch.Fetcher{Client: client, MaxFailures: fetchMaxFailures}
	if kernel, err = f.Fetch(fctx, spec.GetKernel(), dir, nil); err != nil {
		return "", "", nil, fmt.Errorf("kernel: %w", err)
	}
	if initrd, err = f.Fetch(fctx, spec.GetInitrd(), dir, nil); err != nil {
		return "", "", nil, fmt.Errorf("initrd: %w", err)
	}
	for _, x := range spec.GetExtensions() {
		p, err := f.Fetch(fctx, x.GetImage(), dir, nil)
		if err != nil {
			return "", "", nil, fmt.Errorf("extension %s %s: %w", x.GetName(), x.GetVersion(), err)
		}
		exts = append(exts, boot.Extension{Name: x.GetName(), Path: p, SHA256: x.GetImage().GetSha256()})
	}
	return kernel, initrd, exts, nil
}

// VerifyRelease checks that spec's release manifest is signed by one of
// keys (ed25519 over the manifest bytes, signature base64) and lists the
// kernel, initrd and boot loader digests spec names; the check is
// releasesig.Verify, the same the hub runs on trusted keys. Errors say
// which check failed.
func VerifyRelease(spec *roostv1.RevisionSpec, keys []ed25519.PublicKey) error {
	if len(keys) == 0 {
		return errors.New("no trusted release keys: add releaseKeys to the agent config (roost-image enroll --release-key)")
	}
	_, err := releasesig.Verify(releasesig.FromRevision(spec), keys)
	return err
}

// VerifyExtension checks that x's manifest is signed by one of keys and
// names x's image (digest, size), name and version: releasesig's check,
// the same the hub runs when an Extension is pushed.
func VerifyExtension(x *roostv1.RevisionExtension, keys []ed25519.PublicKey) error {
	if len(keys) == 0 {
		return errors.New("no trusted release keys: add releaseKeys to the agent config (roost-image enroll --release-key)")
	}
	return releasesig.VerifyExtension(releasesig.FromRevisionExtension(x), keys)
}
