// Package scenario is one table of cases, Service views in and what a
// node does with packets out, that the explainer and every mode's packet
// tracer must agree with. A scenario has steps (add, scale, change a
// policy, delete): each step changes the node's state, the mode under
// test applies it (a partial sync after the first), and every expected
// packet is traced through what the mode then holds. Goldens of rule
// text say what a mode writes; scenarios say what its rules do.
//
// The files (testdata/*.yaml, embedded) need no root and no kernel; each
// mode's test runs them over its fake, and package explain runs them
// over the explainer in every mode.
//
// A mode's driver (its scenario_test.go) holds only what is the mode's:
// how to build its Dataplane over a fake and trace a packet through the
// fake, and any check of its own after each sync. The rest is here, so
// every mode is held to the same test: NewTracer syncs as the agent does
// (full, then partial with the Changed hint), and RunAll, the one call a
// driver makes, takes the tracer through the table (Run), through the
// table again moved to IPv6 (IPv6), and asks tracer and explainer about
// every golden input (Probes, or WideProbes).
//
// A file:
//
//	node: {nodeName: node-a, nodeIps: [10.200.0.10], clusterCidrs: [10.244.0.0/16]}  # a NodeConfig
//	steps:
//	- name: add
//	  set:                       # ServiceViews added or replaced (protojson field names)
//	  - {namespace: default, name: web, clusterIps: [10.96.0.10], ...}
//	  delete: [default/old]      # views removed
//	  node: {...}                # a new NodeConfig (optional)
//	  expect:
//	  - packet: tcp 10.244.0.5 -> 10.96.0.10:80
//	    action: forward          # forward, reject, drop, pass
//	    endpoints: [10.244.0.2:8080, 10.244.1.2:8080]   # even shares
//	    masquerade: false
//	    affinity: 0              # ClientIP affinity seconds
//	    why: endpoints           # checked against the explainer only
//	    modes:                   # where a mode differs by design
//	      userspace: {masquerade: true}
//
// Invariant: an expectation a mode overrides says why in a comment; every
// other expectation holds in every mode.
package scenario
