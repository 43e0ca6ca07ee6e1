// Package dptest holds what the kernel-mode test beds in e2e/dataplane
// share: the bed itself (namespaces, echo pods, and a command runner
// that records what the dataplane sent), the service views and states
// they program, the benchmark workload, CPU meters and drift benchmark,
// and the checks on the traffic that results. mode.go holds what every
// mode's bed does alike: its TestMain, applying a state, the families
// and conntrack cleaner its Dataplane is built with. Each mode's package
// keeps only what is specific to its kernel interface.
//
// The family checks (families.go) address the bed's Family: a mode runs
// each over Families (ForFamilies), IPv4 on an IPv4-only bed and IPv6 on
// a dual-stack one (NewBedFor), where it must program both families as
// a dual-stack node does. Service picks each pod's address of the
// cluster IP's family; State lists the node's addresses and cluster
// CIDRs of every family the bed has.
package dptest
