// Package cachetest builds cache.View and cache.NodeView values from
// *switchyardv1.Resource for tests of the cache and the servers: each view
// is encoded once with cache.Encode, resource versions are a hash of the
// body and system versions a hash of the (name, version) pairs, so two
// builds of the same resources compare equal byte for byte. The hashes are
// stand-ins with the same properties as the compute side's, not the same
// values.
package cachetest
