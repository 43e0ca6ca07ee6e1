package cluster

import (
	"fmt"
	"os"
)

// credential is how a kubeconfig authenticates: a client certificate or a
// bearer token.
type credential struct {
	certFile, keyFile, token string
}

// writeKubeconfig writes a single-context kubeconfig for server.
func writeKubeconfig(path, server, caFile string, cred credential) error {
	user := ""
	switch {
	case cred.token != "":
		user = fmt.Sprintf("    token: %s\n", cred.token)
	default:
		user = fmt.Sprintf("    client-certificate: %s\n    client-key: %s\n", cred.certFile, cred.keyFile)
	}
	body := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: bed
  cluster:
    server: %s
    certificate-authority: %s
users:
- name: bed
  user:
%scontexts:
- name: bed
  context: {cluster: bed, user: bed}
current-context: bed
`, server, caFile, user)
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		return fmt.Errorf("write kubeconfig %s: %w", path, err)
	}
	return nil
}
