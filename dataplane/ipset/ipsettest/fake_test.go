package ipsettest_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/switchyard-proxy/switchyard/dataplane/ipset/ipsettest"
)

// restore runs input through "ipset restore [-exist]".
func restore(t *testing.T, f *ipsettest.Fake, input string, exist bool) error {
	t.Helper()
	argv := []string{"ipset", "restore"}
	if exist {
		argv = append(argv, "-exist")
	}
	_, err := f.Run(t.Context(), argv, []byte(input))
	return err
}

// TestMembers: every type either mode creates accepts members in ipset
// save's spelling only, and only of the set's family.
func TestMembers(t *testing.T) {
	tests := []struct {
		create   string
		good     []string
		bad      []string
		wantType string
	}{
		{create: "hash:ip family inet",
			good: []string{"10.0.0.1"},
			bad:  []string{"10.0.0.01", "fd00::1", "10.0.0.0/24", "10.0.0.1,tcp:80"}},
		{create: "hash:ip family inet6",
			good: []string{"fd00::1"},
			bad:  []string{"10.0.0.1", "fd00:0::1", "FD00::1"}},
		{create: "hash:net family inet",
			good: []string{"10.0.0.0/24", "10.0.0.1"},
			bad:  []string{"10.0.0.1/24", "10.0.0.1/32", "fd00::/64"}},
		{create: "hash:ip,port family inet",
			good: []string{"10.0.0.1,tcp:80", "10.0.0.1,udp:53", "10.0.0.1,sctp:9"},
			bad:  []string{"10.0.0.1:80", "10.0.0.1,icmp:80", "10.0.0.1,tcp:0", "10.0.0.1,tcp:080", "10.0.0.1,tcp:65536"}},
		{create: "hash:ip,port,ip family inet",
			good: []string{"10.0.0.1,tcp:80,10.0.0.1"},
			bad:  []string{"10.0.0.01,tcp:80,10.0.0.1", "10.0.0.1,tcp:80", "10.0.0.1,tcp:80,fd00::1"}},
		{create: "hash:ip,port,ip family inet6",
			good: []string{"fd00::1,tcp:80,fd00::1"},
			bad:  []string{"10.0.0.1,tcp:80,10.0.0.1"}},
		{create: "hash:ip,port,net family inet",
			good: []string{"10.0.0.1,tcp:80,192.0.2.0/24", "10.0.0.1,tcp:80,192.0.2.1"},
			bad:  []string{"10.0.0.1,tcp:80,192.0.2.1/32", "10.0.0.1,tcp:80,192.0.2.1/24"}},
		{create: "bitmap:port range 0-65535",
			good: []string{"0", "30080", "65535"},
			bad:  []string{"030080", "65536", "-1", "tcp:80"}},
		{create: "bitmap:port range 30000-32767",
			good: []string{"30000"},
			bad:  []string{"80"}},
	}
	for _, tc := range tests {
		t.Run(tc.create, func(t *testing.T) {
			f := ipsettest.New()
			if err := restore(t, f, "create S "+tc.create+"\n", false); err != nil {
				t.Fatal(err)
			}
			for _, m := range tc.good {
				if err := restore(t, f, "add S "+m+"\n", false); err != nil {
					t.Errorf("add %s: %v", m, err)
				}
			}
			for _, m := range tc.bad {
				if err := restore(t, f, "add S "+m+"\n", true); err == nil || !strings.Contains(err.Error(), "member") {
					t.Errorf("add %s: got %v, want a bad member error", m, err)
				}
			}
			if len(f.SetMembers("S")) != len(tc.good) {
				t.Errorf("members %q, want %q", f.SetMembers("S"), tc.good)
			}
		})
	}
}

func TestCreate(t *testing.T) {
	tests := []struct {
		name, input string
		exist       bool
		wantErr     string
	}{
		{name: "unknown type", input: "create S hash:ipport family inet\n", wantErr: "unknown"},
		{name: "name too long", input: "create " + strings.Repeat("N", 32) + " hash:ip\n", wantErr: "longer than 31"},
		{name: "bitmap without range", input: "create S bitmap:port\n", wantErr: "range"},
		{name: "bad family", input: "create S hash:ip family inet4\n", wantErr: "family"},
		{name: "bad maxelem", input: "create S hash:ip maxelem 0\n", wantErr: "maxelem"},
		{name: "twice", input: "create S hash:ip\ncreate S hash:ip\n", wantErr: "already exists"},
		{name: "twice with -exist", input: "create S hash:ip\ncreate S hash:ip family inet\n", exist: true},
		{name: "-exist on the line", input: "create S hash:ip\ncreate S hash:ip -exist\n"},
		{name: "other type with -exist", input: "create S hash:ip\ncreate S hash:net\n", exist: true, wantErr: "already exists"},
		{name: "other family with -exist", input: "create S hash:ip\ncreate S hash:ip family inet6\n", exist: true, wantErr: "already exists"},
		{name: "other maxelem with -exist", input: "create S hash:ip\ncreate S hash:ip maxelem 10\n", exist: true, wantErr: "already exists"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := restore(t, ipsettest.New(), tc.input, tc.exist)
			if (err != nil) != (tc.wantErr != "") || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("err = %v, want %q", err, tc.wantErr)
			}
		})
	}
}

func TestAddDelExistAndMaxelem(t *testing.T) {
	f := ipsettest.New()
	if err := restore(t, f, "create S hash:ip family inet maxelem 2\nadd S 10.0.0.1\n", false); err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		input   string
		exist   bool
		wantErr string
	}{
		{"add S 10.0.0.1\n", false, "already added"},
		{"add S 10.0.0.1\n", true, ""},
		{"del S 10.0.0.9\n", false, "not added"},
		{"del S 10.0.0.9\n", true, ""},
		{"add S 10.0.0.2\nadd S 10.0.0.3\n", false, "Hash is full"},
		{"add T 10.0.0.1\n", true, "does not exist"},
		{"add S 10.0.0.1 timeout 5\n", true, "Syntax error"},
	}
	for _, s := range steps {
		err := restore(t, f, s.input, s.exist)
		if (err != nil) != (s.wantErr != "") || (err != nil && !strings.Contains(err.Error(), s.wantErr)) {
			t.Errorf("%q exist=%v: err = %v, want %q", s.input, s.exist, err, s.wantErr)
		}
	}
	// The restore that overflowed kept the line before the failing one.
	if got, want := f.SetMembers("S"), []string{"10.0.0.1", "10.0.0.2"}; !cmp.Equal(got, want) {
		t.Errorf("members %q, want %q", got, want)
	}
}

func TestRestoreStopsAtFirstError(t *testing.T) {
	f := ipsettest.New()
	in := "# comment\ncreate S hash:ip\nadd S 10.0.0.1\nadd S bad\nadd S 10.0.0.2\nCOMMIT\n"
	err := restore(t, f, in, true)
	if err == nil || !strings.Contains(err.Error(), `line 4 "add S bad"`) {
		t.Fatalf("err = %v, want one naming line 4", err)
	}
	if got := f.SetMembers("S"); !cmp.Equal(got, []string{"10.0.0.1"}) {
		t.Errorf("members %q, want those before the failing line", got)
	}
}

func TestSaveListAndSingleCommands(t *testing.T) {
	f := ipsettest.New()
	ctx := t.Context()
	run := func(argv ...string) (string, error) {
		out, err := f.Run(ctx, argv, nil)
		return string(out), err
	}
	for _, argv := range [][]string{
		{"ipset", "create", "B", "bitmap:port", "range", "0-65535"},
		{"ipset", "create", "H", "hash:ip,port", "family", "inet6", "maxelem", "10"},
		{"ipset", "-exist", "create", "H", "hash:ip,port", "family", "inet6", "maxelem", "10"},
		{"ipset", "add", "B", "30080"},
		{"ipset", "add", "H", "fd00::1,tcp:80"},
	} {
		if _, err := run(argv...); err != nil {
			t.Fatalf("%v: %v", argv, err)
		}
	}
	want := "create B bitmap:port range 0-65535\nadd B 30080\n" +
		"create H hash:ip,port family inet6 hashsize 1024 maxelem 10 bucketsize 12\nadd H fd00::1,tcp:80\n"
	if out, err := run("ipset", "save"); err != nil || out != want || f.Save() != want {
		t.Errorf("save: %v\n%s\nwant:\n%s", err, out, want)
	}
	if out, err := run("ipset", "save", "B"); err != nil || out != "create B bitmap:port range 0-65535\nadd B 30080\n" {
		t.Errorf("save B: %v\n%s", err, out)
	}
	if _, err := run("ipset", "save", "NOPE"); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("save of a missing set: %v", err)
	}
	if out, err := run("ipset", "list", "-n"); err != nil || out != "B\nH\n" {
		t.Errorf("list -n: %v %q", err, out)
	}
	if _, err := run("ipset", "list", "B"); err == nil {
		t.Error("list B is not implemented, yet succeeded")
	}
	if _, err := run("ipset", "flush", "H"); err != nil || len(f.SetMembers("H")) != 0 {
		t.Errorf("flush: %v, members %q", err, f.SetMembers("H"))
	}
	if _, err := run("iptables-save"); err == nil {
		t.Error("a command other than ipset was accepted")
	}
}

func TestSwap(t *testing.T) {
	f := ipsettest.New()
	in := "create A hash:ip\nadd A 10.0.0.1\ncreate B hash:ip\nadd B 10.0.0.2\ncreate C hash:net\n"
	if err := restore(t, f, in, false); err != nil {
		t.Fatal(err)
	}
	if err := restore(t, f, "swap A B\n", false); err != nil {
		t.Fatal(err)
	}
	if a, b := f.SetMembers("A"), f.SetMembers("B"); !cmp.Equal(a, []string{"10.0.0.2"}) || !cmp.Equal(b, []string{"10.0.0.1"}) {
		t.Errorf("after swap A=%q B=%q", a, b)
	}
	if err := restore(t, f, "swap A C\n", false); err == nil || !strings.Contains(err.Error(), "type does not match") {
		t.Errorf("swap of different types: %v", err)
	}
	if err := restore(t, f, "swap A NOPE\n", false); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("swap with a missing set: %v", err)
	}
}

func TestDestroyAsksTheOwner(t *testing.T) {
	f := ipsettest.New()
	used := map[string]bool{"A": true}
	f.InUse = func(name string) bool { return used[name] }
	if err := restore(t, f, "create A hash:ip\ncreate B hash:ip\n", false); err != nil {
		t.Fatal(err)
	}
	if err := restore(t, f, "destroy B\ndestroy A\n", false); err == nil || !strings.Contains(err.Error(), "in use") {
		t.Fatalf("destroying a set in use: %v", err)
	}
	if !f.Exists("A") || f.Exists("B") {
		t.Errorf("after a failed destroy: A exists %v (want true), B exists %v (want false)", f.Exists("A"), f.Exists("B"))
	}
	used["A"] = false
	if _, err := f.Run(t.Context(), []string{"ipset", "destroy", "A"}, nil); err != nil || f.SetMembers("A") != nil {
		t.Errorf("destroy once unused: %v", err)
	}
}

func TestAddSetAndSets(t *testing.T) {
	f := ipsettest.New()
	f.AddSet("cali40all-hosts", "hash:ip", "inet", "10.0.0.2", "10.0.0.1")
	f.AddSet("P", "bitmap:port", "")
	want := []ipsettest.Set{
		{Name: "P", Type: "bitmap:port", Members: []string{}},
		{Name: "cali40all-hosts", Type: "hash:ip", Family: "inet", Members: []string{"10.0.0.1", "10.0.0.2"}},
	}
	if diff := cmp.Diff(want, f.Sets()); diff != "" {
		t.Errorf("Sets (-want +got):\n%s", diff)
	}
	// A foreign set is as real as any: create -exist with its spec is a no-op.
	if err := restore(t, f, "create P bitmap:port range 0-65535\nadd P 80\n", true); err != nil {
		t.Fatal(err)
	}
}
