package ipvstest_test

import (
	"strings"
	"testing"

	"github.com/switchyard-proxy/switchyard/dataplane/ipvs/ipvstest"
)

func TestIPSetRestore(t *testing.T) {
	tests := []struct {
		name, input string
		exist       bool
		wantErr     string
	}{
		{name: "create and add", input: "create S hash:ip,port family inet\nadd S 10.0.0.1,tcp:80\n"},
		{name: "bad member", input: "create S hash:ip,port family inet\nadd S 10.0.0.1:80\n", wantErr: "bad hash:ip,port member"},
		{name: "wrong family", input: "create S hash:ip family inet6\nadd S 10.0.0.1\n", wantErr: "bad hash:ip member"},
		{name: "host net spelled as address", input: "create S hash:net family inet\nadd S 10.0.0.1/32\n", wantErr: "bad hash:net member"},
		{name: "duplicate add", input: "create S bitmap:port range 0-65535\nadd S 80\nadd S 80\n", wantErr: "already added"},
		{name: "duplicate add with -exist", input: "create S bitmap:port range 0-65535\nadd S 80\nadd S 80\n", exist: true},
		{name: "missing set", input: "add T 80\n", wantErr: "does not exist"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := ipvstest.New()
			argv := []string{"ipset", "restore"}
			if tc.exist {
				argv = append(argv, "-exist")
			}
			_, err := f.Run(t.Context(), argv, []byte(tc.input))
			if (err != nil) != (tc.wantErr != "") || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("err = %v, want %q", err, tc.wantErr)
			}
		})
	}
}

func TestSetsReferencedByRules(t *testing.T) {
	f := ipvstest.New()
	ctx := t.Context()
	rule := "*filter\n:X - [0:0]\n-A X -m set --match-set S dst -j DROP\nCOMMIT\n"
	if _, err := f.Run(ctx, []string{"iptables-restore", "--noflush"}, []byte(rule)); err == nil {
		t.Fatal("a rule matching a missing set was accepted")
	}
	if _, err := f.Run(ctx, []string{"ipset", "restore"}, []byte("create S hash:ip family inet\n")); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Run(ctx, []string{"iptables-restore", "--noflush"}, []byte(rule)); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Run(ctx, []string{"ipset", "restore"}, []byte("destroy S\n")); err == nil {
		t.Fatal("a set in use was destroyed")
	}
	if got := f.MutatingCalls(); len(got) != 4 {
		t.Errorf("mutating calls %v", got)
	}
}
