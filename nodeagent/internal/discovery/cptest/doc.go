// Package cptest is a scripted DiscoveryService on loopback for tests of
// the agent: a test pushes responses onto the current stream and reads the
// requests the agent sent, with their stream number. It can end the
// current stream with a status (e.g. ABORTED), stop serving, and serve
// again on the same address. WithTLS serves it over TLS or mTLS.
package cptest
