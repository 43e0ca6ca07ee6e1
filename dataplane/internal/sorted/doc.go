// Package sorted lists the keys of a map in order. Every mode writes its
// rules, dumps and plans in a stable order while keeping them in maps,
// whose iteration order is random; this is the one place that turns a
// map into its ordered keys.
//
// Invariants:
//   - The result is a fresh slice, never nil (an empty map gives an empty
//     slice), allocated once at the map's size: Keys runs on the render
//     and sync paths, where slices.Sorted(maps.Keys(m)) would grow its
//     slice by appending (several allocations for a small map).
//   - The order is total for the comparison given, so equal inputs give
//     equal outputs.
package sorted
