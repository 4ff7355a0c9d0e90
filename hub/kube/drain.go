package kube

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	policyv1client "k8s.io/client-go/kubernetes/typed/policy/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"k8s.io/kubectl/pkg/drain"

	"github.com/roostfleet/roost/syncbuf"
)

// CordonAnnotation marks a Node that Drain cordoned; its value is the
// reason given to Drain (for example "lease 42", the fencing token of the
// Lease the machine reboots under). Uncordon only undoes cordons carrying
// it.
const CordonAnnotation = "roost.io/cordoned-for"

// drainSlack is how long Drain waits past its timeout for kubectl's drain
// to notice the deadline (it sleeps 5 s between refused evictions) before
// returning without it.
const drainSlack = time.Second

// DrainError is the error of a Drain that did not empty the Node: pods
// whose eviction was refused (a PodDisruptionBudget, most often) or that
// were evicted but had not terminated when the timeout ran out, or pods
// kubectl's drain refuses to remove at all (pods without a controller,
// which a drain never deletes; see Drain).
type DrainError struct {
	Node     string
	Pods     []BlockedPod  // sorted by namespace and name; empty when Err says it all
	TimedOut bool          // the drain timeout (or the caller's deadline) ran out
	Timeout  time.Duration // the timeout given to Drain
	Err      error         // kubectl drain's error, or the context's
	// Output is what kubectl's drain printed (evictions, refusals and
	// retries, one per line), for logs.
	Output string
}

// BlockedPod is a pod that kept a Drain from finishing.
type BlockedPod struct {
	Namespace, Name string
	// Budget is the PodDisruptionBudget that refused the pod's eviction,
	// "" when no budget did.
	Budget string
	// Reason is why the pod is still there: the API server's refusal, e.g.
	// "Cannot evict pod as it would violate the pod's disruption budget.
	// The disruption budget web needs 2 healthy pods and has 2 currently",
	// or "evicted, not terminated yet".
	Reason string
}

func (e *DrainError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "kube: draining node %s: ", e.Node)
	if len(e.Pods) == 0 {
		// kubectl's drain says "cannot delete cannot delete Pods that
		// declare no controller ...": say it once.
		b.WriteString(strings.Replace(e.Err.Error(), "cannot delete cannot delete ", "cannot delete ", 1))
	}
	for i, p := range e.Pods {
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "pod %s/%s", p.Namespace, p.Name)
		if p.Budget != "" {
			fmt.Fprintf(&b, " blocked by PodDisruptionBudget %s", p.Budget)
		}
		fmt.Fprintf(&b, ": %s", p.Reason)
	}
	if e.TimedOut {
		fmt.Fprintf(&b, " (drain timeout %v reached)", e.Timeout)
	}
	return b.String()
}

func (e *DrainError) Unwrap() error { return e.Err }

// Drain cordons Node node and evicts its pods through the Eviction API
// (k8s.io/kubectl/pkg/drain), as `kubectl drain --ignore-daemonsets
// --delete-emptydir-data` does: PodDisruptionBudgets hold, each pod gets its
// own terminationGracePeriodSeconds, DaemonSet pods and static (mirror) pods
// stay, and emptyDir data is lost (the machine reboots into a fresh OS
// anyway). Pods that declare no controller are not deleted: nothing would
// recreate them elsewhere, so Drain fails naming them and an operator
// decides (delete them, or give them a controller).
//
// The cordon sets spec.unschedulable and CordonAnnotation = reason, unless
// an operator already cordoned the Node (unschedulable without the
// annotation): that cordon is left as it is, so Uncordon will not lift it.
//
// Drain returns nil once every evicted pod is gone, or an error within
// timeout (plus about a second): a *DrainError when pods remain (an
// eviction refused by a PodDisruptionBudget is retried every 5 s until the
// timeout, and the error then names the pod and the budget), or an error
// wrapping the API error when the Node cannot be read or cordoned. Either
// way the Node stays cordoned; uncordoning is the caller's decision.
func (c *Client) Drain(ctx context.Context, node string, timeout time.Duration, reason string) error {
	if timeout <= 0 {
		return fmt.Errorf("kube: draining node %s: timeout must be positive, got %v", node, timeout)
	}
	if reason == "" {
		return fmt.Errorf("kube: draining node %s: empty reason", node)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := c.cordon(ctx, node, reason); err != nil {
		return err
	}

	rec := &evictionRecorder{errs: map[podKey]error{}, evicted: map[podKey]bool{}, gone: map[podKey]bool{}}
	out := &syncbuf.Buffer{}
	h := &drain.Helper{
		Ctx:                 ctx,
		Client:              recordingClient{Interface: c.cs, rec: rec},
		Force:               false,
		GracePeriodSeconds:  -1,
		IgnoreAllDaemonSets: true,
		DeleteEmptyDirData:  true,
		Out:                 out,
		ErrOut:              out,
		OnPodDeletionOrEvictionFinished: func(pod *corev1.Pod, _ bool, err error) {
			if err == nil {
				rec.finished(pod.Namespace, pod.Name)
			}
		},
	}
	if dl, ok := ctx.Deadline(); ok {
		h.Timeout = time.Until(dl)
	}
	done := make(chan error, 1)
	go func() { done <- drain.RunNodeDrain(h, node) }()
	var err error
	select {
	case err = <-done:
	case <-ctx.Done():
		// kubectl notices the deadline between its 5 s retry sleeps
		// only: give it a moment, then report what is known.
		select {
		case err = <-done:
		case <-time.After(drainSlack):
			err = ctx.Err()
		}
	}
	if err == nil {
		return nil
	}
	de := &DrainError{
		Node:     node,
		Pods:     rec.blocked(),
		TimedOut: errors.Is(ctx.Err(), context.DeadlineExceeded),
		Timeout:  timeout,
		Err:      err,
		Output:   out.String(),
	}
	return de
}

// cordon marks node unschedulable with CordonAnnotation = reason, unless an
// operator cordoned it already.
func (c *Client) cordon(ctx context.Context, node, reason string) error {
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := c.cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if _, ours := n.Annotations[CordonAnnotation]; n.Spec.Unschedulable && !ours {
			return nil // an operator's cordon: keep it theirs
		}
		if n.Spec.Unschedulable && n.Annotations[CordonAnnotation] == reason {
			return nil
		}
		return c.patchNode(ctx, n, map[string]any{CordonAnnotation: reason}, true)
	})
	if err != nil {
		return fmt.Errorf("kube: cordoning node %s: %w", node, err)
	}
	return nil
}

// Uncordon makes Node node schedulable again if Drain cordoned it
// (CordonAnnotation present), removing the annotation. A Node an operator
// cordoned, or one that is not cordoned, is left alone. A missing Node is an
// error wrapping the API's NotFound.
func (c *Client) Uncordon(ctx context.Context, node string) error {
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := c.cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if _, ours := n.Annotations[CordonAnnotation]; !ours {
			return nil
		}
		return c.patchNode(ctx, n, map[string]any{CordonAnnotation: nil}, false)
	})
	if err != nil {
		return fmt.Errorf("kube: uncordoning node %s: %w", node, err)
	}
	return nil
}

// patchNode sets annotations (nil values remove) and spec.unschedulable on
// n with a JSON merge patch that carries n's resourceVersion, so it fails
// with a Conflict when n changed since it was read.
func (c *Client) patchNode(ctx context.Context, n *corev1.Node, annotations map[string]any, unschedulable bool) error {
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"resourceVersion": n.ResourceVersion, "annotations": annotations},
		"spec":     map[string]any{"unschedulable": unschedulable},
	})
	if err != nil {
		return err
	}
	_, err = c.cs.CoreV1().Nodes().Patch(ctx, n.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	return err
}

type podKey struct{ namespace, name string }

// evictionRecorder keeps, per pod, the last refusal of its eviction and
// whether it was evicted and gone: kubectl's drain reports only the first
// line of the API's refusal, not the cause that names the budget.
type evictionRecorder struct {
	mu      sync.Mutex
	errs    map[podKey]error
	evicted map[podKey]bool
	gone    map[podKey]bool
}

func (r *evictionRecorder) evict(namespace, name string, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	k := podKey{namespace, name}
	switch {
	case err == nil:
		delete(r.errs, k)
		r.evicted[k] = true
	case apierrors.IsNotFound(err):
		delete(r.errs, k)
		r.gone[k] = true
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		// The drain's deadline cut a retry short: keep the refusal.
	default:
		r.errs[k] = err
	}
}

func (r *evictionRecorder) finished(namespace, name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.gone[podKey{namespace, name}] = true
}

// budgetRE finds the budget's name in the API server's cause message:
// "The disruption budget NAME needs N healthy pods and has M currently" or
// "The disruption budget NAME is still being processed by the server."
var budgetRE = regexp.MustCompile(`^The disruption budget (\S+) `)

// blocked lists the pods the drain could not remove, sorted.
func (r *evictionRecorder) blocked() []BlockedPod {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []BlockedPod
	for k, err := range r.errs {
		if r.gone[k] {
			continue
		}
		p := BlockedPod{Namespace: k.namespace, Name: k.name, Reason: err.Error()}
		var se apierrors.APIStatus
		if errors.As(err, &se) {
			st := se.Status()
			msgs := []string{st.Message}
			if st.Details != nil {
				for _, cause := range st.Details.Causes {
					if cause.Type == policyv1.DisruptionBudgetCause {
						if m := budgetRE.FindStringSubmatch(cause.Message); m != nil {
							p.Budget = m[1]
						}
					}
					if cause.Message != "" {
						msgs = append(msgs, cause.Message)
					}
				}
			}
			p.Reason = strings.Join(msgs, " ")
		}
		out = append(out, p)
	}
	for k := range r.evicted {
		if !r.gone[k] {
			if _, refused := r.errs[k]; !refused {
				out = append(out, BlockedPod{Namespace: k.namespace, Name: k.name, Reason: "evicted, not terminated yet"})
			}
		}
	}
	slices.SortFunc(out, func(a, b BlockedPod) int {
		if c := strings.Compare(a.Namespace, b.Namespace); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	return out
}

// recordingClient is the clientset kubectl's drain uses: the Client's, with
// policy/v1 evictions recorded (and not retried by client-go).
type recordingClient struct {
	kubernetes.Interface
	rec *evictionRecorder
}

func (c recordingClient) PolicyV1() policyv1client.PolicyV1Interface {
	return recordingPolicy{PolicyV1Interface: c.Interface.PolicyV1(), rec: c.rec}
}

type recordingPolicy struct {
	policyv1client.PolicyV1Interface
	rec *evictionRecorder
}

func (p recordingPolicy) Evictions(namespace string) policyv1client.EvictionInterface {
	return recordingEvictions{EvictionInterface: p.PolicyV1Interface.Evictions(namespace), rest: p.RESTClient(), rec: p.rec}
}

type recordingEvictions struct {
	policyv1client.EvictionInterface
	rest rest.Interface
	rec  *evictionRecorder
}

// Evict is client-go's Evict without client-go's own retries: when the
// budget's status is stale the API server answers 429 with Retry-After 10,
// which client-go would retry silently up to 10 times (100 s), hiding the
// refusal from kubectl's drain (which retries refused evictions itself,
// every 5 s) and from the DrainError.
func (e recordingEvictions) Evict(ctx context.Context, eviction *policyv1.Eviction) error {
	err := e.rest.Post().
		AbsPath("/api/v1").
		Namespace(eviction.Namespace).
		Resource("pods").
		Name(eviction.Name).
		SubResource("eviction").
		Body(eviction).
		MaxRetries(0).
		Do(ctx).
		Error()
	e.rec.evict(eviction.Namespace, eviction.Name, err)
	return err
}
