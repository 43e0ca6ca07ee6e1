package conformance

import (
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestBedSkips(t *testing.T) {
	rules := BedSkips()
	all := regexp.MustCompile(SkipRegexp(rules))
	tests := []struct {
		name string
		want string // a word of the reason; "" when the spec runs
	}{
		{"[sig-network] Networking should recreate its iptables rules if they are deleted [Provider:gce,aws,local,azure] [Disruptive]", "SSH"},
		{"[sig-network] DNS should provide DNS for the cluster [Provider:gce]", "cloud provider"},
		{"[sig-network] LoadBalancers [Feature:LoadBalancer] should be able to change the type and ports of a TCP service [Slow]", "load-balancer"},
		{"[sig-network] [Feature:IPv6DualStack] should create service with ipv6 cluster ip", "IPv4-only"},
		{"[sig-network] Networking should provide Internet connection for containers [Feature:Networking-IPv6] [Experimental][LinuxOnly]", "IPv4-only"},
		{"[sig-network] Networking should provide Internet connection for containers [Feature:Networking-IPv4]", "Internet"},
		{"[sig-network] Services should allow creating a basic SCTP service with pod and endpoints [LinuxOnly] [Serial]", "SCTP"},
		{"[sig-network] Netpol NetworkPolicy between server and client should enforce updated policy [Feature:NetworkPolicy]", "NetworkPolicy"},
		{"[sig-network] KubeProxy should set TCP CLOSE_WAIT timeout [Privileged]", "sysctls"},
		{"[sig-network] DNS configMap nameserver Forward PTR lookup should forward PTR records lookup to upstream nameserver [Serial] [Slow]", "Internet"},
		{"[sig-network] DNS configMap nameserver Change stubDomain should be able to change stubDomain configuration [Serial] [Slow]", ""},
		{"[sig-network] Networking IPerf2 [Feature:Networking-Performance] should run iperf2", "benchmark"},
		{"[sig-network] LocalhostNodePorts should proxy localhost NodePort traffic to backends across nodes [Feature:LocalhostNodePorts]", "extras"},
		{"[sig-network] Something [Feature:SomethingNew] works", "opt-in [Feature"},
		// Run: LoadBalancer Services checked through their ClusterIP,
		// Disruptive specs that decide for themselves, Serial, Conformance.
		{"[sig-network] Services should serve endpoints on same port and different protocol for internal traffic on Type LoadBalancer", ""},
		{"[sig-network] Services should implement NodePort and HealthCheckNodePort correctly when ExternalTrafficPolicy changes", ""},
		{"[sig-network] Services should work after restarting kube-proxy [Disruptive]", ""},
		{"[sig-network] Services should work after restarting apiserver [Disruptive]", ""},
		{"[sig-network] DefaultIngressClass should set default value on new IngressClass [Serial]", ""},
		{"[sig-network] Services should be able to create a functioning NodePort service [Conformance]", ""},
		{"[sig-network] DNS should work with a service name that starts with a digit [FeatureGate:RelaxedServiceNameValidation]", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { checkSkip(t, rules, all, tt.name, tt.want) })
	}
}

// checkSkip wants the spec name skipped by rules with a reason containing
// want (run when want is ""), and the joined regexp all to agree.
func checkSkip(t *testing.T, rules []SkipRule, all *regexp.Regexp, name, want string) {
	t.Helper()
	reason, ok, err := SkipReason(rules, name)
	if err != nil {
		t.Fatal(err)
	}
	if ok != (want != "") || !strings.Contains(reason, want) {
		t.Errorf("SkipReason = %q, %v; want one containing %q", reason, ok, want)
	}
	if all.MatchString(name) != ok {
		t.Errorf("SkipRegexp matches %v, the table %v", all.MatchString(name), ok)
	}
}

// TestDualStackBedSkips: on a dual-stack bed the [Feature:IPv6DualStack]
// specs run (unless another rule, such as SCTP, holds), everything else is
// skipped as on the IPv4 bed, and the IPv4 table keeps skipping them.
func TestDualStackBedSkips(t *testing.T) {
	ds, v4 := DualStackBedSkips(), BedSkips()
	tests := []struct {
		name string
		want string // a word of the dual-stack reason; "" when the spec runs
	}{
		{"[sig-network] [Feature:IPv6DualStack] should have at least one dual-stack node", ""},
		{"[sig-network] [Feature:IPv6DualStack] should create service with ipv6,v4 cluster ip", ""},
		{"[sig-network] [Feature:IPv6DualStack] Granular Checks: Services Secondary IP Family [LinuxOnly] should function for client IP based session affinity: udp [LinuxOnly]", ""},
		{"[sig-network] [Feature:IPv6DualStack] Granular Checks: Services Secondary IP Family [LinuxOnly] should function for pod-Service: sctp [Feature:SCTPConnectivity]", "SCTP"},
		{"[sig-network] Networking should provide Internet connection for containers [Feature:Networking-IPv6] [Experimental][LinuxOnly]", "Internet"},
		{"[sig-network] Networking should provide Internet connection for containers [Feature:Networking-IPv4]", "Internet"},
		{"[sig-network] Something [Feature:SomethingNew] works", "opt-in [Feature"},
		{"[sig-network] Something [Feature:IPv6Other] works", "opt-in [Feature"},
		{"[sig-network] Something [Feature:I] works", "opt-in [Feature"},
		{"[sig-network] Services should be able to create a functioning NodePort service [Conformance]", ""},
	}
	all := regexp.MustCompile(SkipRegexp(ds))
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkSkip(t, ds, all, tt.name, tt.want)
			if strings.Contains(tt.name, "IPv6DualStack") {
				if reason, _, _ := SkipReason(v4, tt.name); !strings.Contains(reason, "IPv4-only") {
					t.Errorf("IPv4 bed: SkipReason = %q, want IPv4-only", reason)
				}
			}
		})
	}
	if len(ds) != len(v4) {
		t.Errorf("%d dual-stack rules, %d IPv4 ones: only the family rule should differ", len(ds), len(v4))
	}
}

func TestRecordSkips(t *testing.T) {
	r := Results{Skip: SkipRegexp(BedSkips()), Specs: map[string]Spec{
		"[sig-network] Services should allow creating a basic SCTP service with pod and endpoints [LinuxOnly] [Serial]": {Outcome: Skipped},
		"[sig-network] Services should work after restarting apiserver [Disruptive]":                                    {Outcome: Skipped, Reason: "Skipped because component:kube-apiserver is not running as pod."},
		"[sig-network] Services should serve a basic endpoint from pods [Conformance]":                                  {Outcome: Passed},
		"[sig-network] Other spec": {Outcome: Skipped},
	}}
	n, err := RecordSkips(&r, BedSkips())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for name, s := range r.Specs {
		got[name] = s.Reason
	}
	want := map[string]string{
		"[sig-network] Services should allow creating a basic SCTP service with pod and endpoints [LinuxOnly] [Serial]": "not run on the bed: " + reasonOf(t, "SCTP"),
		"[sig-network] Services should work after restarting apiserver [Disruptive]":                                    "Skipped because component:kube-apiserver is not running as pod.",
		"[sig-network] Services should serve a basic endpoint from pods [Conformance]":                                  "",
		"[sig-network] Other spec": "not run on the bed: matched -skip " + r.Skip,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("reasons (-want +got):\n%s", diff)
	}
	if n != 2 {
		t.Errorf("RecordSkips = %d, want 2", n)
	}
}

// reasonOf is the reason of the rule whose pattern is pattern.
func reasonOf(t *testing.T, pattern string) string {
	t.Helper()
	for _, r := range BedSkips() {
		if r.Pattern == pattern {
			return r.Reason
		}
	}
	t.Fatalf("no skip rule %q", pattern)
	return ""
}
