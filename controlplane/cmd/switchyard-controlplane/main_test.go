package main

import (
	"io"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/switchyard-proxy/switchyard/controlplane/internal/daemon"
	"github.com/switchyard-proxy/switchyard/controlplane/internal/model"
)

func TestAdvertiseServiceFlag(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		want    model.ServiceKey
		wantErr string
	}{
		{name: "default: off"},
		{
			name: "namespace/name",
			args: []string{"--advertise-service=switchyard-system/switchyard-controlplane"},
			want: model.ServiceKey{Namespace: "switchyard-system", Name: "switchyard-controlplane"},
		},
		{name: "no namespace", args: []string{"--advertise-service=switchyard-controlplane"}, wantErr: "want namespace/name"},
		{name: "empty name", args: []string{"--advertise-service=ns/"}, wantErr: `"ns/"`},
		{name: "bad name", args: []string{"--advertise-service=ns/Not_A_Name"}, wantErr: "Not_A_Name"},
		{name: "two slashes", args: []string{"--advertise-service=ns/a/b"}, wantErr: "a/b"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o, _, err := parseFlags(tc.args, io.Discard)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("parseFlags(%v) error = %v, want one containing %q", tc.args, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("parseFlags(%v): %v", tc.args, err)
			}
			if diff := cmp.Diff(tc.want, o.AdvertiseService); diff != "" {
				t.Errorf("AdvertiseService (-want +got):\n%s", diff)
			}
		})
	}
}

// TestHelpDocumentsFlags: every flag has a usage line in --help.
func TestHelpDocumentsFlags(t *testing.T) {
	var out strings.Builder
	if _, _, err := parseFlags([]string{"--help"}, &out); err == nil {
		t.Fatal("--help returned no error")
	}
	if !strings.Contains(out.String(), "-advertise-service") || !strings.Contains(out.String(), "grpc") {
		t.Errorf("--help does not document --advertise-service:\n%s", out.String())
	}
}

func TestNodePortAddressesFlag(t *testing.T) {
	tests := []struct {
		name    string
		value   string
		want    []string
		wantErr string
	}{
		{name: "default: each mode's own"},
		{name: "primary", value: "primary", want: []string{"primary"}},
		{
			name:  "CIDRs canonical, keywords kept, duplicates once",
			value: "10.0.0.7/24, primary,fd00::1/64,10.0.0.0/24,all",
			want:  []string{"10.0.0.0/24", "primary", "fd00::/64", "all"},
		},
		{name: "a range holding loopback is fine: agents cut loopback out", value: "0.0.0.0/0", want: []string{"0.0.0.0/0"}},
		{name: "a keyword twice", value: "primary,primary", wantErr: `"primary" given twice`},
		{name: "localhost", value: "localhost", wantErr: "route_localnet"},
		{name: "inside loopback", value: "127.0.0.1/32", wantErr: "127.0.0.1/32 is loopback"},
		{name: "IPv6 loopback", value: "::1/128", wantErr: "::1/128 is loopback"},
		{name: "not a CIDR", value: "10.0.0.1", wantErr: "want a CIDR, primary or all"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			listFlag(t, "--nodeport-addresses="+tc.value, tc.want, tc.wantErr, func(o daemon.Options) []string { return o.Views.NodePortAddresses })
		})
	}
}

func TestFlowtableInterfacesFlag(t *testing.T) {
	tests := []struct {
		name    string
		value   string
		want    []string
		wantErr string
	}{
		{name: "default: no flowtable"},
		{name: "names and patterns, in order, each once", value: "eth0, veth*,ens[0-9],eth0", want: []string{"eth0", "veth*", "ens[0-9]"}},
		{name: "bad pattern", value: "eth[", wantErr: "syntax error in pattern"},
		{name: "a path", value: "eth0/1", wantErr: "no '/'"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			listFlag(t, "--flowtable-interfaces="+tc.value, tc.want, tc.wantErr, func(o daemon.Options) []string { return o.Views.FlowtableInterfaces })
		})
	}
}

// listFlag parses one list flag and checks the list got (or the error).
func listFlag(t *testing.T, arg string, want []string, wantErr string, got func(daemon.Options) []string) {
	t.Helper()
	o, _, err := parseFlags([]string{arg}, io.Discard)
	if wantErr != "" {
		if err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Fatalf("parseFlags(%s) error = %v, want one containing %q", arg, err, wantErr)
		}
		return
	}
	if err != nil {
		t.Fatalf("parseFlags(%s): %v", arg, err)
	}
	if diff := cmp.Diff(want, got(o)); diff != "" {
		t.Errorf("%s (-want +got):\n%s", arg, diff)
	}
}
