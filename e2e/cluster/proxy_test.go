package cluster

import "testing"

func TestParseProxy(t *testing.T) {
	tests := []struct {
		name    string
		want    Proxy
		wantErr bool
	}{
		{name: "switchyard-nftables", want: Proxy{Name: "switchyard-nftables", Kind: KindSwitchyard, Mode: "nftables"}},
		{name: "switchyard-userspace", want: Proxy{Name: "switchyard-userspace", Kind: KindSwitchyard, Mode: "userspace"}},
		{name: "kube-proxy-iptables", want: Proxy{Name: "kube-proxy-iptables", Kind: KindKubeProxy, Mode: "iptables"}},
		{name: "kube-proxy-ipvs", wantErr: true}, // the bed's kernel has no IPVS
		{name: "cilium", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseProxy(tt.name)
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Errorf("ParseProxy(%q) = %+v, %v; want %+v, error %v", tt.name, got, err, tt.want, tt.wantErr)
			}
		})
	}
}
