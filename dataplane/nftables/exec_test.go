package nftables

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/knftables"
)

// scriptRunner answers commands from a table and records them.
type scriptRunner struct {
	calls []string
	out   map[string]string
	err   error
}

func (s *scriptRunner) Run(_ context.Context, argv []string, stdin []byte) ([]byte, error) {
	cmd := strings.Join(argv, " ")
	s.calls = append(s.calls, cmd+"\n"+string(stdin))
	return []byte(s.out[cmd]), s.err
}

func TestExecInterfaceRunsTransactionText(t *testing.T) {
	r := &scriptRunner{}
	nft := NewExecInterface(r, IPv6, "switchyard")
	tx := nft.NewTransaction()
	tx.Add(&knftables.Table{})
	tx.Add(&knftables.Chain{Name: "services"})
	if err := nft.Run(t.Context(), tx); err != nil {
		t.Fatal(err)
	}
	want := []string{"nft -f -\nadd table ip6 switchyard\nadd chain ip6 switchyard services\n"}
	if d := cmp.Diff(want, r.calls); d != "" {
		t.Errorf("calls (-want +got):\n%s", d)
	}
}

func TestExecInterfaceKeepsBuildErrors(t *testing.T) {
	r := &scriptRunner{}
	nft := NewExecInterface(r, IPv4, "switchyard")
	tx := nft.NewTransaction()
	tx.Add(&knftables.Rule{Chain: "x"}) // no rule text
	if err := nft.Run(t.Context(), tx); err == nil || len(r.calls) != 0 {
		t.Errorf("invalid transaction ran: err=%v calls=%v", err, r.calls)
	}
}

func TestExecInterfaceListFiltersTable(t *testing.T) {
	r := &scriptRunner{out: map[string]string{
		"nft --json --terse list chains ip": `{"nftables": [{"metainfo": {"json_schema_version": 1}},
			{"chain": {"family": "ip", "table": "switchyard", "name": "services", "handle": 1}},
			{"chain": {"family": "ip", "table": "other", "name": "foreign", "handle": 2}},
			{"chain": {"family": "ip", "table": "switchyard", "name": "svc-X-a/b/tcp/", "handle": 3}}]}`,
	}}
	got, err := NewExecInterface(r, IPv4, "switchyard").List(t.Context(), "chains")
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]string{"services", "svc-X-a/b/tcp/"}, got); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
}

func TestIsNotFound(t *testing.T) {
	cases := []struct {
		err  error
		want bool
	}{
		{&RunError{Stderr: "Error: No such file or directory\nlist table ip x"}, true},
		{&RunError{Stderr: "Error: syntax error\nNo such file or directory"}, false},
		{errors.New("No such file or directory"), false},
	}
	for _, c := range cases {
		if got := IsNotFound(c.err); got != c.want {
			t.Errorf("IsNotFound(%v) = %v", c.err, got)
		}
	}
}
