package settings

import (
	"log/slog"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/switchyard-proxy/switchyard/controlplane/internal/nodeview"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

var flags = nodeview.Defaults{
	Mode: switchyardv1.DataplaneMode_DATAPLANE_MODE_IPTABLES, SyncPeriod: time.Hour, IPVSScheduler: "wrr",
	ClusterCIDRs: []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16")}, NodePortAddresses: []string{"primary"},
}

func TestParse(t *testing.T) {
	tests := []struct {
		name    string
		yaml    string
		want    func(*nodeview.Defaults)
		wantErr string
	}{
		{name: "empty file: the flags", yaml: ""},
		{name: "mode only", yaml: "mode: nftables", want: func(d *nodeview.Defaults) { d.Mode = switchyardv1.DataplaneMode_DATAPLANE_MODE_NFTABLES }},
		{name: "empty mode leaves the agents'", yaml: `mode: ""`, want: func(d *nodeview.Defaults) { d.Mode = switchyardv1.DataplaneMode_DATAPLANE_MODE_UNSPECIFIED }},
		{
			name: "every field",
			yaml: "mode: ipvs\nminSyncPeriod: 1s\nsyncPeriod: 30m\nipvsScheduler: mh\nclusterCIDRs: [10.1.2.3/16, fd00::/64]\nmasqueradeAll: true\nnodePortAddresses: [all, 192.168.0.0/24]\nflowtableInterfaces: [eth0, veth*]\nloadBalancing: maglev\n",
			want: func(d *nodeview.Defaults) {
				*d = nodeview.Defaults{
					Mode: switchyardv1.DataplaneMode_DATAPLANE_MODE_IPVS, MinSyncPeriod: time.Second, SyncPeriod: 30 * time.Minute,
					IPVSScheduler: "mh", ClusterCIDRs: []netip.Prefix{netip.MustParsePrefix("10.1.0.0/16"), netip.MustParsePrefix("fd00::/64")},
					MasqueradeAll: true, NodePortAddresses: []string{"all", "192.168.0.0/24"}, LoadBalancing: "maglev",
					FlowtableInterfaces: []string{"eth0", "veth*"},
				}
			},
		},
		{name: "an empty list clears the flag's", yaml: "clusterCIDRs: []\nnodePortAddresses: []", want: func(d *nodeview.Defaults) { d.ClusterCIDRs, d.NodePortAddresses = nil, nil }},
		{name: "unknown field (a typo)", yaml: "mdoe: ipvs", wantErr: `unknown field "mdoe"`},
		{name: "bad mode", yaml: "mode: ebpf", wantErr: `mode: "ebpf": want iptables`},
		{name: "bad scheduler", yaml: "ipvsScheduler: fifo", wantErr: "ipvsScheduler"},
		{name: "bad algorithm", yaml: "loadBalancing: Maglev", wantErr: `loadBalancing: "Maglev": want random`},
		{name: "bad duration", yaml: "syncPeriod: soon", wantErr: "syncPeriod"},
		{name: "negative duration", yaml: "minSyncPeriod: -1s", wantErr: "negative"},
		{name: "bad CIDR", yaml: "clusterCIDRs: [10.0.0.1]", wantErr: "clusterCIDRs"},
		{name: "bad flowtable pattern", yaml: "flowtableInterfaces: [\"eth[\"]", wantErr: "flowtableInterfaces"},
		{name: "flowtable name too long", yaml: "flowtableInterfaces: [averyveryverylongname]", wantErr: "longer than an interface name"},
		{name: "loopback node ports", yaml: "nodePortAddresses: [127.0.0.1/32]", wantErr: "loopback"},
		{name: "every bad field is named", yaml: "mode: x\nipvsScheduler: y", wantErr: "ipvsScheduler"},
		{name: "not YAML", yaml: "mode: [", wantErr: Key},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse([]byte(tc.yaml), flags)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Parse error %v, want one containing %q", err, tc.wantErr)
				}
				if diff := cmp.Diff(flags, got, cmpopts.EquateComparable(netip.Prefix{})); diff != "" {
					t.Errorf("a bad file changed the settings (-want +got):\n%s", diff)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := flags
			want.ClusterCIDRs = append([]netip.Prefix(nil), flags.ClusterCIDRs...)
			if tc.want != nil {
				tc.want(&want)
			}
			if diff := cmp.Diff(want, got, cmpopts.EquateComparable(netip.Prefix{}), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("settings (-want +got):\n%s", diff)
			}
		})
	}
}

type countingObserver struct{ inUse, rejected, differ int }

func (o *countingObserver) SettingsInUse(string, string) { o.inUse++ }
func (o *countingObserver) SettingsRejected()            { o.rejected++ }
func (o *countingObserver) AgentSettingsDiffer()         { o.differ++ }

// TestResolve walks a ConfigMap's life: absent, good, bad (kept), fixed,
// without the key (kept), deleted (flags).
func TestResolve(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Unix(1_800_000_000, 0))
	obs := &countingObserver{}
	s := New(Config{Flags: flags, Namespace: "ns", Name: "cm", Observer: obs, Clock: clk, Logger: slog.New(slog.NewTextHandler(t.Output(), nil))})
	nft := switchyardv1.DataplaneMode_DATAPLANE_MODE_NFTABLES
	cm := func(rv, yaml string) Input {
		return Input{Exists: true, ResourceVersion: rv, Data: map[string]string{Key: yaml}}
	}
	steps := []struct {
		name       string
		in         Input
		wantMode   switchyardv1.DataplaneMode
		wantSource string
		wantRV     string
		wantErr    bool
	}{
		{"absent: flags", Input{}, flags.Mode, FromFlags, "", false},
		{"good", cm("1", "mode: nftables"), nft, FromConfigMap, "1", false},
		{"bad: kept", cm("2", "mode: nope"), nft, FromConfigMap, "1", true},
		{"no key: kept", Input{Exists: true, ResourceVersion: "3"}, nft, FromConfigMap, "1", true},
		{"fixed", cm("4", "mode: ipvs"), switchyardv1.DataplaneMode_DATAPLANE_MODE_IPVS, FromConfigMap, "4", false},
		{"deleted: flags", Input{}, flags.Mode, FromFlags, "", false},
	}
	var errSince time.Time
	for _, st := range steps {
		clk.SetTime(clk.Now().Add(time.Minute))
		d := s.Resolve(st.in)
		got := s.Status()
		if d.Mode != st.wantMode || got.Source != st.wantSource || got.ResourceVersion != st.wantRV || (got.Error != "") != st.wantErr {
			t.Errorf("%s: mode %v, status %+v; want mode %v, source %s, resourceVersion %q, error %v",
				st.name, d.Mode, got, st.wantMode, st.wantSource, st.wantRV, st.wantErr)
		}
		if st.wantErr && errSince.IsZero() {
			errSince = got.ErrorSince
		}
		if st.wantErr && !got.ErrorSince.Equal(errSince) {
			t.Errorf("%s: error since %v, want the first failure's %v", st.name, got.ErrorSince, errSince)
		}
	}
	if obs.rejected != 2 {
		t.Errorf("rejected %d times, want 2", obs.rejected)
	}
	if got := s.Status().ConfigMap; got != "ns/cm" {
		t.Errorf("ConfigMap %q, want ns/cm", got)
	}
}

func TestCheckAgent(t *testing.T) {
	obs := &countingObserver{}
	s := New(Config{Flags: flags, Observer: obs, Logger: slog.New(slog.NewTextHandler(t.Output(), nil))})
	if s.CheckAgent("n1", "aaaa") {
		t.Error("a replica that has no hash yet reports a difference")
	}
	s.InUse("bbbb")
	tests := []struct {
		hash string
		want bool
	}{{"", false}, {"bbbb", false}, {"aaaa", true}}
	for _, tc := range tests {
		if got := s.CheckAgent("n1", tc.hash); got != tc.want {
			t.Errorf("CheckAgent(%q) = %v, want %v", tc.hash, got, tc.want)
		}
	}
	if obs.differ != 1 || obs.inUse != 1 {
		t.Errorf("observer saw differ=%d inUse=%d, want 1 and 1", obs.differ, obs.inUse)
	}
}

func TestParseRef(t *testing.T) {
	tests := []struct {
		ref, podNS, wantNS, wantName, wantErr string
	}{
		{ref: ""},
		{ref: "switchyard-system/switchyard-controlplane", wantNS: "switchyard-system", wantName: "switchyard-controlplane"},
		{ref: "switchyard-controlplane", podNS: "sy", wantNS: "sy", wantName: "switchyard-controlplane"},
		{ref: "switchyard-controlplane", wantErr: "POD_NAMESPACE"},
		{ref: "Bad_NS/x", wantErr: "namespace"},
		{ref: "ns/", wantErr: "name"},
	}
	for _, tc := range tests {
		ns, name, err := ParseRef(tc.ref, tc.podNS)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("ParseRef(%q, %q) error %v, want one containing %q", tc.ref, tc.podNS, err, tc.wantErr)
			}
			continue
		}
		if err != nil || ns != tc.wantNS || name != tc.wantName {
			t.Errorf("ParseRef(%q, %q) = %q, %q, %v; want %q, %q", tc.ref, tc.podNS, ns, name, err, tc.wantNS, tc.wantName)
		}
	}
}

func TestParseFileRollout(t *testing.T) {
	base := nodeview.Defaults{Mode: switchyardv1.DataplaneMode_DATAPLANE_MODE_IPTABLES, MinSyncPeriod: time.Second}
	d, spec, err := ParseFile([]byte(`
mode: iptables
rollout:
  name: to-nftables
  settings: {mode: nftables}
  canaryNodes: [node-0]
  steps: ["50%"]
  pause: 5s
`), base)
	if err != nil {
		t.Fatal(err)
	}
	if d.Mode != switchyardv1.DataplaneMode_DATAPLANE_MODE_IPTABLES || spec == nil {
		t.Fatalf("defaults %v, spec %v", d, spec)
	}
	if spec.Target.Mode != switchyardv1.DataplaneMode_DATAPLANE_MODE_NFTABLES || spec.Target.MinSyncPeriod != time.Second ||
		spec.Pause != 5*time.Second || len(spec.Percents) != 2 || spec.CanaryNodes[0] != "node-0" {
		t.Errorf("spec %+v", spec)
	}
	for _, bad := range []string{
		"rollout: {settings: {mode: nftables}}",
		"rollout: {name: x}",
		"rollout: {name: x, settings: {mode: bogus}}",
		"rollout: {name: x, settings: {rollout: {name: y, settings: {}}}}",
		"rollout: {name: x, settings: {}, steps: [\"80%\", \"20%\"]}",
		"rollout: {name: x, settings: {}, pause: soon}",
		"rollout: {name: x, settings: {}, canaryNodes: [\"Not A Node\"]}",
		"rollout: {name: x, settings: {loadBalancing: maglev}}", // cluster-wide only
	} {
		if _, _, err := ParseFile([]byte(bad), base); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
}
