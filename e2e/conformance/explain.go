package conformance

import "regexp"

// Explanation is the analysis of a failure e2e.test's message alone does
// not give: for the proxies matching Proxy and the specs matching Spec
// (regexps), why the spec fails there.
type Explanation struct {
	Proxy, Spec string
	Why         string
}

// Explanations are the known failures of the matrix, each found on the bed
// and explained; CONFORMANCE.md prints Why on the failure's row.
func Explanations() []Explanation {
	return []Explanation{}
}

// Explain returns the first explanation matching proxy and spec, or "".
func Explain(rules []Explanation) func(proxy, spec string) string {
	return func(proxy, spec string) string {
		for _, e := range rules {
			if regexp.MustCompile(e.Proxy).MatchString(proxy) && regexp.MustCompile(e.Spec).MatchString(spec) {
				return e.Why
			}
		}
		return ""
	}
}
