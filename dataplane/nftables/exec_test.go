package nftables

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/knftables"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/dataplane/command"
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
	nft := NewExecInterface(r, dataplane.IPv6, "switchyard")
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
	nft := NewExecInterface(r, dataplane.IPv4, "switchyard")
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
	got, err := NewExecInterface(r, dataplane.IPv4, "switchyard").List(t.Context(), "chains")
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
		{&command.RunError{Stderr: "Error: No such file or directory\nlist table ip x"}, true},
		{&command.RunError{Stderr: "Error: syntax error\nNo such file or directory"}, false},
		{errors.New("No such file or directory"), false},
	}
	for _, c := range cases {
		if got := IsNotFound(c.err); got != c.want {
			t.Errorf("IsNotFound(%v) = %v", c.err, got)
		}
	}
}

func TestBatchElements(t *testing.T) {
	add := func(set, e string) string { return "add element ip switchyard " + set + " { " + e + " }\n" }
	var many, manyWant strings.Builder
	for i := range maxElementBatch + 1 {
		many.WriteString(add("s", fmt.Sprint(i)))
	}
	manyWant.WriteString("add element ip switchyard s { 0")
	for i := 1; i < maxElementBatch; i++ {
		fmt.Fprintf(&manyWant, ", %d", i)
	}
	fmt.Fprintf(&manyWant, " }\n%s", add("s", fmt.Sprint(maxElementBatch)))
	for _, tc := range []struct{ name, in, want string }{
		{"nothing to join", "add table ip switchyard\nflush chain ip switchyard c\n", "add table ip switchyard\nflush chain ip switchyard c\n"},
		{"one set's run joined",
			"flush set ip switchyard a\n" + add("a", "10.0.0.1") + add("a", "10.0.0.2 comment \"x, y\"") + "add rule ip switchyard c drop\n",
			"flush set ip switchyard a\nadd element ip switchyard a { 10.0.0.1, 10.0.0.2 comment \"x, y\" }\nadd rule ip switchyard c drop\n"},
		{"another set starts a new command", add("a", "1") + add("b", "2") + add("a", "3"), add("a", "1") + add("b", "2") + add("a", "3")},
		{"deletes are left alone", "delete element ip switchyard a { 1 }\ndelete element ip switchyard a { 2 }\n",
			"delete element ip switchyard a { 1 }\ndelete element ip switchyard a { 2 }\n"},
		{"a verdict map element", add("m", "10.96.0.1 . tcp . 80 : goto svc-X") + add("m", "10.96.0.2 . tcp . 80 : goto svc-Y"),
			add("m", "10.96.0.1 . tcp . 80 : goto svc-X, 10.96.0.2 . tcp . 80 : goto svc-Y")},
		{"no newline at the end", add("a", "1") + strings.TrimSuffix(add("a", "2"), "\n"), add("a", "1, 2")},
		{"at most maxElementBatch per command", many.String(), manyWant.String()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := string(batchElements([]byte(tc.in))); got != tc.want {
				t.Errorf("batchElements:\n%s\nwant:\n%s", got, tc.want)
			}
		})
	}
}
