package translate

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/switchyard-proxy/switchyard/dataplane/serviceport"
)

// FuzzNamesAsTheAPI checks the one definition of names the control plane
// and the agents share (serviceport) against the API server's own
// validation: a namespace, a Service name and a non-empty service or
// endpoint port name are DNS-1123 labels.
func FuzzNamesAsTheAPI(f *testing.F) {
	for _, s := range []string{
		"", "a", "0", "web-1", "a--b", "-a", "a-", "Web", "a.b", "a/b", "a b", "a_b", "é",
		"metrics-endpoint-http", strings.Repeat("a", 63), strings.Repeat("a", 64),
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		api := len(validation.IsDNS1123Label(s)) == 0
		if got := serviceport.CheckNamespace(s) == nil; got != api {
			t.Errorf("CheckNamespace(%q) valid = %v, API %v", s, got, api)
		}
		if got := serviceport.CheckServiceName(s) == nil; got != api {
			t.Errorf("CheckServiceName(%q) valid = %v, API %v", s, got, api)
		}
		if got := serviceport.CheckPortName(s) == nil; got != (api || s == "") {
			t.Errorf("CheckPortName(%q) valid = %v, API %v", s, got, api || s == "")
		}
	})
}
