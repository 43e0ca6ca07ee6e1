// Package ipvstest provides in-memory stand-ins for the ipvs mode's kernel
// seams: Fake implements ipvs.Kernel (virtual and real servers, links,
// addresses, sysctls) and command.Runner (ipset through an
// ipsettest.Fake, the iptables binaries through an iptablestest.Fake),
// records every call and dumps its state as stable text; Clock is a
// manual clock.
package ipvstest
