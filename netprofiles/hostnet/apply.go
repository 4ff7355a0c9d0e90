package hostnet

import (
	"context"
	"errors"
	"fmt"

	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
)

// Result is what an Apply did and found.
type Result struct {
	// Actions are the actions carried out, in order (failed ones too; see
	// the error).
	Actions []Action
	// Observed is the host after the apply.
	Observed HostState
	// Drift lists what still differs from the profile after the apply:
	// the actions a new plan would take, and what cannot be planned
	// (missing links, names taken, …). Empty means the host matches.
	Drift []string
}

// Converged says whether the host matches the profile.
func (r Result) Converged() bool { return len(r.Drift) == 0 }

// maxRounds bounds Apply's observe–plan–execute rounds. One round is
// normally enough; a second catches kernel side effects the plan cannot
// foresee from what it observes (a link released from a deleted bond gets
// back the MTU it had before it was enslaved).
const maxRounds = 3

// Apply converges the host behind nl to the profile: it observes, plans
// (see Plan for the order and the ownership rules) and carries out every
// action, in rounds until a plan is empty (at most maxRounds), then
// observes again and reports the drift. An invalid profile changes
// nothing. Parts the plan cannot do do not stop the rest: at boot a
// machine needs whatever network it can get to call home. The error joins
// the plan's problems and the failed actions.
func Apply(ctx context.Context, nl Netlink, spec *roostv1.NetworkProfileSpec, opts ...Option) (Result, error) {
	var res Result
	var errs []error
	for round := 0; round < maxRounds; round++ {
		h, err := Observe(nl)
		if err != nil {
			return res, errors.Join(append(errs, err)...)
		}
		actions, perr := Plan(spec, h, opts...)
		if perr != nil && !IsPlanError(perr) {
			return res, perr // invalid profile
		}
		if perr != nil && round == 0 {
			errs = append(errs, perr)
		}
		if len(actions) == 0 {
			break
		}
		failed := false
		for _, a := range actions {
			if err := ctx.Err(); err != nil {
				return res, errors.Join(append(errs, err)...)
			}
			res.Actions = append(res.Actions, a)
			if err := a.Do(nl); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", a, err))
				failed = true
			}
		}
		if failed {
			break
		}
	}
	var err error
	res.Observed, err = Observe(nl)
	if err != nil {
		return res, errors.Join(append(errs, err)...)
	}
	res.Drift, _ = Drift(spec, res.Observed, opts...)
	return res, errors.Join(errs...)
}

// Drift lists how host state h differs from the profile: the actions a
// plan would take and what cannot be planned. Empty means h matches.
func Drift(spec *roostv1.NetworkProfileSpec, h HostState, opts ...Option) ([]string, error) {
	actions, err := Plan(spec, h, opts...)
	var pe *PlanError
	if err != nil && !errors.As(err, &pe) {
		return nil, err
	}
	var out []string
	for _, a := range actions {
		out = append(out, a.String())
	}
	if pe != nil {
		for _, p := range pe.Problems {
			out = append(out, "! "+p)
		}
	}
	return out, nil
}
