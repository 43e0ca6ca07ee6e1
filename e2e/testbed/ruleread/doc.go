// Package ruleread reads a Service's rules out of rules text (what
// iptables-save, iptables -S and nft print, or compare's rendering of a
// netlink read), for the harnesses that time a proxy by watching its
// rules change (e2e/latency on the real cluster, e2e/compare side by
// side): it finds the chain a cluster IP and port dispatch to, and tells
// whether the text holds an address.
//
//   - IptablesServiceChain: in iptables-save output of the nat table, the
//     KUBE-SVC- (or KUBE-SVL-) chain the cluster IP's rule sends to,
//     wherever the proxy put that rule (kube-proxy in KUBE-SERVICES,
//     Switchyard in a KUBE-SHARD- chain).
//   - NftServiceChain: in an nft listing holding the service-ips map
//     (`nft list map …` or `nft list table …`), the chain the cluster IP's
//     TCP element goes to; Elements lists any listing's map elements.
//   - HoldsAddr and CountAddrs: whether, and how many of, given addresses
//     occur in rules text as whole addresses.
//
// Invariants:
//   - Everything here reads text and nothing else: no command is run and
//     no state kept, so a caller decides where and how often rules are
//     read, and a parse can be tested on a pasted listing.
//   - The formats are those the beds' tools print (iptables-save of
//     iptables 1.8.9, nft 1.0.6), whichever proxy wrote the rules. nft may
//     print a chain name in a verdict in quotes; a name is returned
//     without them, as the chain is named.
//   - A whole address is bounded by bytes that cannot continue a dotted
//     IPv4 address (anything but digits and dots), so 10.244.1.5 is not
//     found in 10.244.1.50 or 110.244.1.5. The rule is IPv4's: an IPv6
//     address is looked for as its text with the same bounds.
//   - A chain not found is an error saying so, never an empty name: the
//     proxy has not programmed the Service yet, and a caller retries.
package ruleread
