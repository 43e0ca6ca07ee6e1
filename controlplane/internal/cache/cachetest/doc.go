// Package cachetest builds cache.View and cache.NodeView values from
// *switchyardv1.Resource for tests of the cache and the servers: each view
// is a deterministic marshal of its resource wrapped by cache.NewView, as
// the compute side's are, resource versions are a hash of the body and
// system versions a hash of the (name, version) pairs, so two builds of
// the same resources compare equal byte for byte. The marshal and the
// hashes are stand-ins for the compute side's (package nodeview, the one
// encoder of real views) with the same properties, not the same values.
package cachetest
