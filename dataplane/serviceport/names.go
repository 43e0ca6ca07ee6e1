package serviceport

import "errors"

// The one definition of the names a view may carry, shared by the control
// plane (on what the API server gave it) and every agent mode (on what
// arrived over the wire). Agents must refuse what the control plane would
// never send: these names end up inside chain, set and map names and rule
// comments, where a space, quote or slash would break the ruleset of
// every other service.
//
// They are what Kubernetes allows:
//   - a namespace is a DNS-1123 label (ValidateNamespaceName);
//   - a Service name is a DNS-1123 label (the API asks DNS-1035 of new
//     Services, a subset; RelaxedServiceNameValidation widens it to
//     DNS-1123, which is what any stored Service can carry);
//   - a service port name, and an EndpointSlice port name, is a
//     DNS-1123 label, or empty for a single-port Service. The API does
//     not ask IANA_SVC_NAME of them (that is for container ports and
//     named target ports): a 20-character service port name is valid.
//
// Checks are byte loops: Read runs them for every view and family on
// every render, where regexps showed up in profiles.

// MaxLabelLength is the longest DNS-1123 label (RFC 1123, 2.1).
const MaxLabelLength = 63

var (
	errEmpty   = errors.New("must not be empty")
	errTooLong = errors.New("must be at most 63 characters")
	errChars   = errors.New("must be lowercase letters, digits and '-', starting and ending with a letter or digit")
)

// CheckNamespace says why ns is not a namespace name, or returns nil.
func CheckNamespace(ns string) error { return checkLabel(ns) }

// CheckServiceName says why name is not a Service name, or returns nil.
func CheckServiceName(name string) error { return checkLabel(name) }

// CheckPortName says why name is not a service or endpoint port name
// ("" is one: a single-port Service need not name its port), or
// returns nil.
func CheckPortName(name string) error {
	if name == "" {
		return nil
	}
	return checkLabel(name)
}

// checkLabel checks s is a DNS-1123 label: 1 to 63 of [a-z0-9-], with
// no '-' first or last.
func checkLabel(s string) error {
	switch {
	case s == "":
		return errEmpty
	case len(s) > MaxLabelLength:
		return errTooLong
	case s[0] == '-' || s[len(s)-1] == '-':
		return errChars
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-') {
			return errChars
		}
	}
	return nil
}
