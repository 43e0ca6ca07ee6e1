package healthchecktest

import (
	"io"
	"net/http"
	"testing"
)

// Get fetches url (a health check node port's or the agent's /healthz)
// and returns the status code and body. Each call dials anew, so a
// listener that closed shows as a failure instead of hiding behind a
// kept-alive connection; a failed request fails the test.
func Get(t testing.TB, url string) (int, string) {
	t.Helper()
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: read body: %v", url, err)
	}
	return resp.StatusCode, string(body)
}
