package main

import (
	"testing"
	"time"
)

func TestParseFlags(t *testing.T) {
	c, err := parseFlags(nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range c.proxies {
		names = append(names, p.Name)
	}
	if len(names) != 4 || names[0] != "switchyard-iptables" || names[1] != "kube-proxy-iptables" {
		t.Errorf("default proxies %v: want each kube-proxy mode right after Switchyard's", names)
	}
	if c.measure.Events != 100 || c.runs != 1 || c.nodes != 2 || c.measure.Gap != 2*time.Second {
		t.Errorf("defaults: %+v", c)
	}
	for _, args := range [][]string{
		{"-proxies", "switchyard-userspace"}, // no rules to read
		{"-proxies", "kube-proxy-ipvs"},
		{"-events", "0"},
		{"-ready-delay", "1500ms"},
		{"extra"},
	} {
		if _, err := parseFlags(args); err == nil {
			t.Errorf("parseFlags(%q): no error", args)
		}
	}
}
