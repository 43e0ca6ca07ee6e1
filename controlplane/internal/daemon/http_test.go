package daemon

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/switchyard-proxy/switchyard/controlplane/internal/apistatus"
)

// TestReadyzDuringOutage: /readyz stays 200 after the first sync, and its
// body names each unavailable resource while the API is unreachable, but
// not the error: anyone who reaches the node reads /readyz.
func TestReadyzDuringOutage(t *testing.T) {
	now := time.Unix(1000, 0)
	api := apistatus.New(apistatus.Options{Now: func() time.Time { return now }})
	lw := api.Wrap("endpointslices", failing{apierrors.NewUnauthorized("token expired")})
	ready := make(chan struct{})
	srv := httptest.NewServer(healthMux(ready, api))
	defer srv.Close()
	get := func() (int, string) {
		t.Helper()
		resp, err := http.Get(srv.URL + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, _ := get(); code != http.StatusServiceUnavailable {
		t.Errorf("before sync: %d, want 503", code)
	}
	close(ready)
	if code, body := get(); code != 200 || body != "ok\n" {
		t.Errorf("synced, API reachable: %d %q, want 200 ok", code, body)
	}
	if _, err := lw.List(metav1.ListOptions{}); err == nil {
		t.Fatal("List succeeded, want unauthorized")
	}
	now = now.Add(12 * time.Second)
	want := "ok\nwarning: Kubernetes API unreachable for 12s: views may be stale\n" +
		"  endpointslices: unavailable for 12s\n"
	if code, body := get(); code != 200 || body != want {
		t.Errorf("during the outage: %d %q, want 200 %q", code, body, want)
	}
	if st := api.Snapshot()[0]; !strings.Contains(st.LastError, "token expired") {
		t.Errorf("the tracker lost the error (%q): operators read it in ListNodes", st.LastError)
	}
}

type failing struct{ err error }

func (f failing) List(metav1.ListOptions) (runtime.Object, error)   { return nil, f.err }
func (f failing) Watch(metav1.ListOptions) (watch.Interface, error) { return nil, f.err }
