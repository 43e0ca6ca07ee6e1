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
