package iptablestest

import (
	"strings"
	"testing"
)

func TestFakeRestoreSemantics(t *testing.T) {
	cases := []struct {
		name, input string
		wantErr     string
	}{
		{"dangling jump", "*nat\n:A - [0:0]\n-A A -j B\nCOMMIT\n", "missing B"},
		{"append to missing chain", "*nat\n-A NOPE -j ACCEPT\nCOMMIT\n", "no chain NOPE"},
		{"delete referenced chain", "*nat\n:A - [0:0]\n-A PREROUTING -j A\n-X A\nCOMMIT\n", "still referenced"},
		{"delete missing rule", "*nat\n-D PREROUTING -j ACCEPT\nCOMMIT\n", "no such rule"},
		{"missing commit", "*nat\n:A - [0:0]\n", "missing COMMIT"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := New()
			if err := f.Restore("iptables", ""); err != nil { // creates the empty tables
				t.Fatal(err)
			}
			before := f.Dump()
			err := f.Restore("iptables", tc.input)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("got %v, want error containing %q", err, tc.wantErr)
			}
			if f.Dump() != before && tc.name != "missing commit" {
				t.Error("failed table block changed state")
			}
		})
	}
}

func TestFakeFlushAndSave(t *testing.T) {
	f := New()
	ctx := t.Context()
	in := "*nat\n:A - [0:0]\n-A A -j RETURN\n-I PREROUTING 1 -j A\nCOMMIT\n"
	if _, err := f.Run(ctx, []string{"iptables-nft-restore", "-w", "--noflush"}, []byte(in)); err != nil {
		t.Fatal(err)
	}
	out, err := f.Run(ctx, []string{"iptables-nft-save", "-t", "nat"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := "*nat\n:PREROUTING ACCEPT [0:0]\n:INPUT ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n:POSTROUTING ACCEPT [0:0]\n:A - [0:0]\n-A PREROUTING -j A\n-A A -j RETURN\nCOMMIT\n"
	if string(out) != want {
		t.Errorf("save:\n%s\nwant:\n%s", out, want)
	}
	// Without --noflush the table is replaced.
	if _, err := f.Run(ctx, []string{"iptables-restore"}, []byte("*nat\nCOMMIT\n")); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(f.Dump(), ":A ") {
		t.Error("restore without --noflush kept chain A")
	}
	if _, err := f.Run(ctx, []string{"conntrack", "-L"}, nil); err == nil {
		t.Error("unknown command accepted")
	}
	if n := len(f.Calls()); n != 4 {
		t.Errorf("recorded %d calls, want 4", n)
	}
}

func TestFakeIPSet(t *testing.T) {
	f := New()
	f.CheckSetRefs = true
	ctx := t.Context()
	run := func(stdin string, argv ...string) error {
		_, err := f.Run(ctx, argv, []byte(stdin))
		return err
	}
	rule := "*nat\n-A POSTROUTING -m set --match-set S src,dst,dst -j RETURN\nCOMMIT\n"
	if err := run(rule, "iptables-restore", "--noflush"); err == nil || !strings.Contains(err.Error(), "Set S doesn't exist") {
		t.Fatalf("restore matching a missing set: %v", err)
	}
	if err := run("create S hash:ip,port,ip family inet maxelem 2\nadd S 10.0.0.1,tcp:80,10.0.0.1\n", "ipset", "restore"); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"add S 10.0.0.01,tcp:80,10.0.0.1", "add S fd00::1,tcp:80,fd00::1", "add S 10.0.0.1,icmp:80,10.0.0.1"} {
		if err := run(bad, "ipset", "restore", "-exist"); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	if err := run("add S 10.0.0.1,tcp:80,10.0.0.1\n", "ipset", "restore"); err == nil {
		t.Error("duplicate add without -exist accepted")
	}
	if err := run("add S 10.0.0.2,tcp:80,10.0.0.2\nadd S 10.0.0.3,tcp:80,10.0.0.3\n", "ipset", "restore"); err == nil {
		t.Error("add beyond maxelem accepted")
	}
	if err := run(rule, "iptables-restore", "--noflush"); err != nil {
		t.Fatal(err)
	}
	if err := run("", "ipset", "destroy", "S"); err == nil || !strings.Contains(err.Error(), "in use") {
		t.Errorf("destroying a set in use: %v", err)
	}
	out, err := f.Run(ctx, []string{"ipset", "save", "S"}, nil)
	want := "create S hash:ip,port,ip family inet hashsize 1024 maxelem 2 bucketsize 12\nadd S 10.0.0.1,tcp:80,10.0.0.1\nadd S 10.0.0.2,tcp:80,10.0.0.2\n"
	if err != nil || string(out) != want {
		t.Errorf("save: %v\n%s\nwant:\n%s", err, out, want)
	}
	if _, err := f.Run(ctx, []string{"ipset", "save", "NOPE"}, nil); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("save of a missing set: %v", err)
	}
	if err := run("*nat\n-D POSTROUTING -m set --match-set S src,dst,dst -j RETURN\nCOMMIT\n", "iptables-restore", "--noflush"); err != nil {
		t.Fatal(err)
	}
	if err := run("", "ipset", "destroy", "S"); err != nil || f.SetMembers("S") != nil {
		t.Errorf("destroy after the rule is gone: %v", err)
	}
}
