package cli

import (
	"fmt"
	"regexp"
	"strconv"

	"google.golang.org/grpc/status"

	"github.com/roostfleet/roost/client"
	"github.com/roostfleet/roost/resource"
)

// checkObjectSizes reports, before anything is sent, every object the hub
// would refuse as larger than resource.MaxObjectBytes (measured as the hub
// does: the size of its protobuf encoding). Checked here, an object far
// above the limit gets the same message as one just above it, instead of
// failing in gRPC when the request exceeds the hub's message size.
func checkObjectSizes(ms []*resource.Manifest) resource.Diagnostics {
	var diags resource.Diagnostics
	for _, m := range ms {
		v := resource.CheckSize(m.Object, resource.SizeHint)
		if v == nil {
			continue
		}
		d := resource.Diagnostic{Source: m.Source, Doc: m.Doc, Position: m.Pos(""), Name: m.Name(), Violation: *v}
		if m.Kind != nil {
			d.Kind = m.Kind.Name
		}
		diags = append(diags, d)
	}
	return diags
}

// messageTooLarge matches gRPC's ResourceExhausted messages for a message
// above a size limit: "grpc: received message larger than max (5242968
// vs. 4194304)", or "grpc: trying to send message larger than max (…)".
var messageTooLarge = regexp.MustCompile(`message larger than max \((\d+) vs\. (\d+)\)`)

// tooLargeError turns gRPC's refusal of a message above a size limit into
// a message that says what to do: a request the hub would not read (bad
// input: exit code 2), or an answer larger than roostctl reads
// (client.MaxMessageBytes). It returns nil for other errors.
func tooLargeError(st *status.Status) error {
	sub := messageTooLarge.FindStringSubmatch(st.Message())
	if sub == nil {
		return nil
	}
	size, _ := strconv.ParseInt(sub[1], 10, 64)
	limit, _ := strconv.ParseInt(sub[2], 10, 64)
	if limit == client.MaxMessageBytes {
		return fmt.Errorf("the hub's answer is %d bytes, more than roostctl reads (%d): ask for less at a time (fewer names, a --selector)", size, limit)
	}
	return usageErrorf("the request is %d bytes, more than the hub accepts in one message (%d): send less at a time, e.g. apply the manifests in several parts", size, limit)
}
