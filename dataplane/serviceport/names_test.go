package serviceport_test

import (
	"regexp"
	"strings"
	"testing"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/dataplane/serviceport"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

func TestCheckNames(t *testing.T) {
	for _, tc := range []struct {
		in              string
		label, portName bool // valid as namespace and service name; as port name
	}{
		{in: "", label: false, portName: true},
		{in: "a", label: true, portName: true},
		{in: "0", label: true, portName: true},
		{in: "web-1", label: true, portName: true},
		{in: "1-web", label: true, portName: true},
		{in: "a--b", label: true, portName: true},
		{in: "metrics-endpoint-http", label: true, portName: true}, // longer than IANA_SVC_NAME's 15
		{in: strings.Repeat("a", 63), label: true, portName: true},
		{in: strings.Repeat("a", 64)},
		{in: "-a"},
		{in: "a-"},
		{in: "-"},
		{in: "Web"},
		{in: "a.b"},
		{in: "a/b"},
		{in: "a b"},
		{in: "a_b"},
		{in: `a"b`},
		{in: "é"},
		{in: "a\x00"},
	} {
		if got := serviceport.CheckNamespace(tc.in) == nil; got != tc.label {
			t.Errorf("CheckNamespace(%q) valid = %v, want %v", tc.in, got, tc.label)
		}
		if got := serviceport.CheckServiceName(tc.in) == nil; got != tc.label {
			t.Errorf("CheckServiceName(%q) valid = %v, want %v", tc.in, got, tc.label)
		}
		if got := serviceport.CheckPortName(tc.in) == nil; got != tc.portName {
			t.Errorf("CheckPortName(%q) valid = %v, want %v", tc.in, got, tc.portName)
		}
	}
}

// The regexps the agent checked names with before names.go. The agent
// must refuse everything they refused: a name an older agent refused
// never reaches chain names or rule comments.
var (
	oldViewName = regexp.MustCompile(`^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$`)
	oldPortName = regexp.MustCompile(`^([a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?)?$`)
)

// TestNamesRefuseWhatTheyRefused walks every string of up to four bytes
// over an alphabet of each character class, plus lengths around the
// limits, and checks names.go accepts no name the old regexps refused,
// and, for port names, exactly what they accepted.
func TestNamesRefuseWhatTheyRefused(t *testing.T) {
	alphabet := []string{"a", "0", "-", ".", "A", "_", "/", " "}
	in, level := []string{""}, []string{""}
	for range 4 {
		var next []string
		for _, s := range level {
			for _, c := range alphabet {
				next = append(next, s+c)
			}
		}
		in, level = append(in, next...), next
	}
	for _, n := range []int{62, 63, 64, 252, 253, 254} {
		in = append(in, strings.Repeat("a", n), "a"+strings.Repeat(".", n-2)+"a")
	}
	for _, s := range in {
		for _, check := range []func(string) error{serviceport.CheckNamespace, serviceport.CheckServiceName} {
			if check(s) == nil && !oldViewName.MatchString(s) {
				t.Errorf("%q: accepted as a namespace or service name, refused before", s)
			}
		}
		if got, old := serviceport.CheckPortName(s) == nil, oldPortName.MatchString(s); got != old {
			t.Errorf("%q: port name valid = %v, before %v", s, got, old)
		}
	}
}

// TestReadRefusesWhatTheControlPlaneRefuses: names with dots or over 63
// characters, which the old regexp let through, are no label, so no
// control plane sends them and an agent refuses them.
func TestReadRefusesWhatTheControlPlaneRefuses(t *testing.T) {
	for _, tc := range []struct{ namespace, name string }{
		{"ns", "a.b"},
		{"a.b", "web"},
		{"ns", strings.Repeat("a", 64)},
		{strings.Repeat("a", 64), "web"},
	} {
		sv := &switchyardv1.ServiceView{Namespace: tc.namespace, Name: tc.name}
		var skips []string
		_, ok := serviceport.Read(tc.namespace+"/"+tc.name, sv, dataplane.IPv4, func(_, reason string) { skips = append(skips, reason) })
		if ok || len(skips) != 1 || skips[0] != "bad or missing namespace/name" {
			t.Errorf("%s/%s: ok = %v, skips %q", tc.namespace, tc.name, ok, skips)
		}
	}
}
