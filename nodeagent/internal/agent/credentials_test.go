package agent

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/switchyard-proxy/switchyard/nodeagent/internal/discovery/cptest"
)

// fakeCredentials is a CredentialSource whose reconnects the test asks for.
type fakeCredentials struct {
	reconnect chan struct{}
	ran       chan struct{}
}

func (c *fakeCredentials) Run(ctx context.Context) error {
	close(c.ran)
	<-ctx.Done()
	return nil
}

func (c *fakeCredentials) Reconnect() <-chan struct{} { return c.reconnect }

// TestCredentialsReconnect: the agent runs its CredentialSource and a
// reconnect it asks for (a rotated client certificate) replaces the
// stream without touching the dataplane beyond a partial sync that
// names no service: the rules stay as they were, and no full resync.
func TestCredentialsReconnect(t *testing.T) {
	cp := cptest.New(t)
	creds := &fakeCredentials{reconnect: make(chan struct{}), ran: make(chan struct{})}
	n := startNode(t, nodeOpts{addrs: []string{cp.Addr()}, stateDir: t.TempDir(), options: func(o *Options) { o.Credentials = creds }})
	<-creds.ran
	cp.Next()
	push(cp, "s1", "n1", nil, svc("ns/a", "1"), svc("ns/b", "2"))
	expectAck(t, cp, "n1", "s1")
	rules, calls := n.dp.Dump(), len(n.dp.Calls())

	creds.reconnect <- struct{}{}
	again := cp.Next()
	if again.Stream != 2 {
		t.Fatalf("after the reconnect: %v on stream %d, want stream 2", again.DeltaSnapshotsRequest, again.Stream)
	}
	if d := cmp.Diff(map[string]string{"ns/a": "1", "ns/b": "2"}, again.GetInitialResourceVersions()); d != "" {
		t.Errorf("initial_resource_versions (-want +got):\n%s", d)
	}
	push(cp, "s1", "n2", nil) // the control plane's resume: nothing changed
	expectAck(t, cp, "n2", "s1")
	if d := cmp.Diff(rules, n.dp.Dump()); d != "" {
		t.Errorf("the rules changed across the reconnect (-before +after):\n%s", d)
	}
	for _, c := range n.dp.Calls()[calls:] {
		if c.Opts.Full || len(c.Opts.Changed) != 0 {
			t.Errorf("the reconnect caused %s Full=%v Changed=%v, want at most a partial sync naming nothing", c.Op, c.Opts.Full, c.Opts.Changed)
		}
	}
}
