package apiserver

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
)

// Identity of the static admin token; system:masters bypasses RBAC.
const (
	adminUser  = "switchyard-admin"
	adminUID   = "switchyard-admin-uid"
	adminGroup = "system:masters"
)

// credentials are the files kube-apiserver needs for authentication.
type credentials struct {
	saKeyFile  string // RSA private key, PEM (PKCS#1), signs SA tokens
	saPubFile  string // its public key, PEM (PKIX), verifies them
	tokenFile  string // static token file: token,user,uid,"group"
	adminToken string
	certDir    string // kube-apiserver writes its self-signed cert here
	caFile     string // apiserver.crt in certDir, once written
}

// writeCredentials generates a service-account key pair and a random admin
// token and writes them below dir.
func writeCredentials(dir string) (credentials, error) {
	c := credentials{
		saKeyFile: filepath.Join(dir, "sa.key"),
		saPubFile: filepath.Join(dir, "sa.pub"),
		tokenFile: filepath.Join(dir, "tokens.csv"),
		certDir:   filepath.Join(dir, "certs"),
	}
	c.caFile = filepath.Join(c.certDir, "apiserver.crt")
	if err := os.MkdirAll(c.certDir, 0o700); err != nil {
		return c, fmt.Errorf("write credentials: %w", err)
	}

	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return c, fmt.Errorf("generate service-account key: %w", err)
	}
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return c, fmt.Errorf("marshal service-account public key: %w", err)
	}
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
	pubPEM := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub})

	c.adminToken, err = randomToken()
	if err != nil {
		return c, err
	}
	tokens := fmt.Sprintf("%s,%s,%s,%q\n", c.adminToken, adminUser, adminUID, adminGroup)

	for path, data := range map[string][]byte{
		c.saKeyFile: keyPEM,
		c.saPubFile: pubPEM,
		c.tokenFile: []byte(tokens),
	} {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			return c, fmt.Errorf("write credentials: %w", err)
		}
	}
	return c, nil
}

func randomToken() (string, error) {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("generate admin token: %w", err)
	}
	return hex.EncodeToString(b), nil
}
