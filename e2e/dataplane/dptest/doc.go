// Package dptest holds what the kernel-mode test beds in e2e/dataplane
// share: the bed itself (namespaces, echo pods, and a command runner
// that records what the dataplane sent), the service views and states
// they program, the benchmark workload and CPU meters, and the checks on
// the traffic that results. Each mode's package keeps only what is
// specific to its kernel interface.
package dptest
