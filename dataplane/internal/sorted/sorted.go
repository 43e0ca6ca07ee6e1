package sorted

import (
	"cmp"
	"slices"
)

// Keys returns the keys of m in ascending order.
func Keys[K cmp.Ordered, V any](m map[K]V) []K {
	keys := collect(m)
	slices.Sort(keys)
	return keys
}

// KeysFunc returns the keys of m ordered by compare (see slices.SortFunc).
func KeysFunc[K comparable, V any](m map[K]V, compare func(a, b K) int) []K {
	keys := collect(m)
	slices.SortFunc(keys, compare)
	return keys
}

func collect[K comparable, V any](m map[K]V) []K {
	keys := make([]K, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	return keys
}
