// Package canarytest stands in for the node's kernel under a datapath
// canary: Datapath is a canary.Config's Dial and Listen, forwarding the
// probe's connection to the canary's cluster IP as the programmed rules
// say, to the loopback port where the endpoint's listener really is.
//
// Invariants:
//   - Nothing binds the addresses the canary names: every listener is on
//     a free loopback port, so tests run in parallel and without
//     privileges.
//   - Faults stand in front of the rules: a broken or diverted Datapath
//     answers so whatever the rules say.
package canarytest
