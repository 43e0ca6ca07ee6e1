package ctl

import (
	"flag"
	"io"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/types/known/timestamppb"

	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// textCase is one input of a function that renders a response's field as
// a status line's text, and the text.
type textCase[In any] struct {
	name string
	in   In
	want string
}

// checkText runs text, named fn, on each case as a subtest.
func checkText[In any](t *testing.T, fn string, text func(In) string, tests []textCase[In]) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := text(tt.in); got != tt.want {
				t.Errorf("%s = %q, want %q", fn, got, tt.want)
			}
		})
	}
}

func TestAPIText(t *testing.T) {
	since := timestamppb.New(time.Date(2030, 5, 6, 7, 8, 9, 0, time.UTC))
	res := func(name, state, err string) *switchyardv1.ApiResourceStatus {
		return &switchyardv1.ApiResourceStatus{Resource: name, State: state, LastError: err}
	}
	checkText(t, "apiText", apiText, []textCase[*switchyardv1.ApiWatchStatus]{
		{"an older control plane", nil, "unknown"},
		{"available", &switchyardv1.ApiWatchStatus{Resources: []*switchyardv1.ApiResourceStatus{res("nodes", "available", "")}}, "available"},
		{"pending", &switchyardv1.ApiWatchStatus{Resources: []*switchyardv1.ApiResourceStatus{
			res("nodes", "available", ""), res("services", "pending", ""), res("servicecidrs", "pending", "")}},
			"pending (services, servicecidrs)"},
		{"outage", &switchyardv1.ApiWatchStatus{ViewsMayBeStale: true, UnavailableSince: since, Resources: []*switchyardv1.ApiResourceStatus{
			res("nodes", "unavailable", "connection refused"), res("services", "available", "")}},
			"UNAVAILABLE since 2030-05-06T07:08:09Z, views may be stale (nodes: connection refused)"},
	})
}

func TestSettingsText(t *testing.T) {
	checkText(t, "settingsText", settingsText, []textCase[*switchyardv1.ControlPlaneSettings]{
		{"an older control plane", nil, "unknown"},
		{"flags", &switchyardv1.ControlPlaneSettings{Hash: "h1", Source: "flags"}, "h1 (flags)"},
		{"configmap", &switchyardv1.ControlPlaneSettings{Hash: "h2", Source: "configmap", ConfigMap: "sys/cp", ResourceVersion: "42"},
			"h2 (configmap sys/cp resourceVersion 42)"},
		{"configmap refused", &switchyardv1.ControlPlaneSettings{Hash: "h1", Source: "flags", ConfigMap: "sys/cp", Error: "unknown field \"mdoe\""},
			`h1 (flags), ConfigMap sys/cp refused: unknown field "mdoe"`},
	})
}

func TestParseInterspersed(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		pos     []string
		desired bool
	}{
		{"flags first", []string{"--desired", "a", "b"}, []string{"a", "b"}, true},
		{"flags last", []string{"a", "b", "--desired"}, []string{"a", "b"}, true},
		{"flags between", []string{"a", "-desired", "b"}, []string{"a", "b"}, true},
		{"after -- all positional", []string{"a", "--", "--desired"}, []string{"a", "--desired"}, false},
		{"none", nil, nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs := flag.NewFlagSet("t", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			desired := fs.Bool("desired", false, "")
			pos, err := parseInterspersed(fs, tt.args)
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tt.pos, pos); d != "" || *desired != tt.desired {
				t.Errorf("positional (-want +got):\n%s\ndesired %v, want %v", d, *desired, tt.desired)
			}
		})
	}
}
