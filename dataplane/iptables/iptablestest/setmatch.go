package iptablestest

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/switchyard-proxy/switchyard/dataplane"
)

// setDims are the dimensions of each ipset type the modes create, in
// member order: "ip" an address, "net" an address or a prefix, "port"
// proto:port (a bare port in bitmap:port, which ignores the protocol).
var setDims = map[string][]string{
	"hash:ip":          {"ip"},
	"hash:net":         {"net"},
	"hash:ip,port":     {"ip", "port"},
	"hash:ip,port,ip":  {"ip", "port", "ip"},
	"hash:ip,port,net": {"ip", "port", "net"},
	"bitmap:port":      {"port"},
}

// setHas reports whether a set of type typ with members holds the
// packet's element that dirs (-m set's "src,dst,dst") pick.
func setHas(typ string, members, dirs []string, b *Branch) (bool, error) {
	dims, ok := setDims[typ]
	if !ok {
		return false, fmt.Errorf("type %s: not understood by the tracer", typ)
	}
	if len(dirs) != len(dims) {
		return false, fmt.Errorf("%d directions for a %s set", len(dirs), typ)
	}
	for _, m := range members {
		in, err := memberHas(typ, dims, strings.Split(m, ","), dirs, b)
		if err != nil {
			return false, fmt.Errorf("member %q: %w", m, err)
		}
		if in {
			return true, nil
		}
	}
	return false, nil
}

// memberHas matches one member, split at commas, dimension by dimension.
func memberHas(typ string, dims, parts, dirs []string, b *Branch) (bool, error) {
	if len(parts) != len(dims) {
		return false, fmt.Errorf("not a %s member", typ)
	}
	for i, dim := range dims {
		addr := b.Pkt.Dst
		if dirs[i] == "src" {
			addr = b.Pkt.Src
		}
		var ok bool
		var err error
		switch dim {
		case "ip":
			ok, err = ipIs(parts[i], addr)
		case "net":
			ok, err = netHas(parts[i], addr)
		case "port":
			if dirs[i] == "src" {
				return false, errors.New("a first packet's source port is unknown to the tracer")
			}
			ok, err = portIs(parts[i], typ == "bitmap:port", b)
		}
		if err != nil || !ok {
			return false, err
		}
	}
	return true, nil
}

func ipIs(part string, a netip.Addr) (bool, error) {
	m, err := netip.ParseAddr(part)
	if err != nil {
		return false, err
	}
	return m == a.Unmap(), nil
}

func netHas(part string, a netip.Addr) (bool, error) {
	if !strings.Contains(part, "/") {
		return ipIs(part, a)
	}
	p, err := netip.ParsePrefix(part)
	if err != nil {
		return false, err
	}
	return p.Contains(a.Unmap()), nil
}

// portIs matches "proto:port", or a bare port in a bitmap:port set.
func portIs(part string, bare bool, b *Branch) (bool, error) {
	proto, port := b.Pkt.Protocol, part
	if !bare {
		name, p, ok := strings.Cut(part, ":")
		if !ok {
			return false, fmt.Errorf("port %q without a protocol", part)
		}
		// A protocol no packet has matches nothing, as before it was typed.
		proto, _ = dataplane.ParseProtocol(name)
		port = p
	}
	n, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return false, err
	}
	return proto == b.Pkt.Protocol && uint16(n) == b.Pkt.Port, nil
}
