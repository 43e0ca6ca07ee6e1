package main

import (
	"io"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

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
