package xtables

import "testing"

func TestSameRulesAcrossSaveSpelling(t *testing.T) {
	cases := []struct {
		rendered, saved string
		same            bool
	}{
		{`-m comment --comment "a b" -p tcp -m tcp ! -s 10.244.0.0/16 -d 10.96.0.11 --dport 80 -j KUBE-MARK-MASQ`,
			`-d 10.96.0.11/32 ! -s 10.244.0.0/16 -p tcp -m comment --comment "a b" -m tcp --dport 80 -j KUBE-MARK-MASQ`, true},
		{`-p tcp -m tcp -m recent --name X --set -j DNAT --to-destination 10.244.0.3:8080`,
			`-p tcp -m tcp -m recent --set --name X --mask 255.255.255.255 --rsource -j DNAT --to-destination 10.244.0.3:8080`, true},
		{`-m statistic --mode random --probability 0.3333333333 -j KUBE-SEP-A`,
			`-m statistic --mode random --probability 0.33333333349 -j KUBE-SEP-A`, true},
		{`-m comment --comment "x" -s 10.0.0.1 -j A`, `-m comment --comment x -s 10.0.0.1/32 -j A`, true},
		{`-d ::0/::3f -j KUBE-SHARD-00`, `-d ::/::3f -j KUBE-SHARD-00`, true},
		{`-d fd00::1 -j A`, `-d fd00::1/128 -j A`, true},
		// Differences that must be seen.
		{`-d 0.0.0.1/0.0.0.63 -j A`, `-d 0.0.0.2/0.0.0.63 -j A`, false},
		{`! -s 10.0.0.0/8 -d 10.1.1.1 -j A`, `-s 10.0.0.0/8 ! -d 10.1.1.1/32 -j A`, false},
		{`-d 10.1.1.1 --dport 80 -j A`, `-d 10.1.1.1 --dport 81 -j A`, false},
		{`-j KUBE-SEP-A`, `-j KUBE-SEP-B`, false},
	}
	for _, tc := range cases {
		if got := SameRules([]string{tc.saved}, []string{tc.rendered}); got != tc.same {
			t.Errorf("SameRules(%q, %q) = %v, want %v", tc.saved, tc.rendered, got, tc.same)
		}
	}
	if SameRules([]string{"-j A"}, []string{"-j A", "-j B"}) {
		t.Error("different lengths compared equal")
	}
}

func BenchmarkCanonRule(b *testing.B) {
	rules := []string{
		`-d 10.96.0.11/32 ! -s 10.244.0.0/16 -p tcp -m comment --comment "ns/s1:http cluster IP" -m tcp --dport 80 -j KUBE-MARK-MASQ`,
		`-p tcp -m comment --comment ns/s1:http -m statistic --mode random --probability 0.20000000019 -j DNAT --to-destination 10.244.0.3:8080`,
	}
	for b.Loop() {
		for _, r := range rules {
			CanonRule(r)
		}
	}
}
