package localcluster

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"time"
)

// authority is the cluster's certificate authority. It signs the API server's
// serving certificate and one client certificate per user, so callers can add
// users (with their own RBAC) at any time.
type authority struct {
	cert *x509.Certificate
	key  crypto.Signer
	pem  []byte
}

func newAuthority() (*authority, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generating CA key: %w", err)
	}
	tmpl := certTemplate("stencil-local-ca")
	tmpl.IsCA = true
	tmpl.BasicConstraintsValid = true
	tmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, fmt.Errorf("creating CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("parsing CA certificate: %w", err)
	}
	return &authority{cert: cert, key: key, pem: pemBlock("CERTIFICATE", der)}, nil
}

// keyPair is a PEM certificate and its PEM private key.
type keyPair struct{ cert, key []byte }

// serving signs a certificate for the API server on loopback.
func (a *authority) serving() (keyPair, error) {
	tmpl := certTemplate("kube-apiserver")
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
	tmpl.DNSNames = []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"}
	return a.sign(tmpl)
}

// client signs a certificate that the API server maps to user name in groups.
func (a *authority) client(name string, groups ...string) (keyPair, error) {
	tmpl := certTemplate(name)
	tmpl.Subject.Organization = groups
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	return a.sign(tmpl)
}

func (a *authority) sign(tmpl *x509.Certificate) (keyPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return keyPair{}, fmt.Errorf("generating key for %s: %w", tmpl.Subject.CommonName, err)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, a.cert, key.Public(), a.key)
	if err != nil {
		return keyPair{}, fmt.Errorf("signing certificate for %s: %w", tmpl.Subject.CommonName, err)
	}
	keyPEM, err := privateKeyPEM(key)
	if err != nil {
		return keyPair{}, err
	}
	return keyPair{cert: pemBlock("CERTIFICATE", der), key: keyPEM}, nil
}

// write stores the pair as <base>.crt and <base>.key.
func (p keyPair) write(base string) error {
	if err := os.WriteFile(base+".crt", p.cert, 0o600); err != nil {
		return fmt.Errorf("writing certificate: %w", err)
	}
	if err := os.WriteFile(base+".key", p.key, 0o600); err != nil {
		return fmt.Errorf("writing key: %w", err)
	}
	return nil
}

// serviceAccountKeys writes the key pair that signs and verifies service
// account tokens.
func serviceAccountKeys(base string) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("generating service account key: %w", err)
	}
	keyPEM, err := privateKeyPEM(key)
	if err != nil {
		return err
	}
	pub, err := x509.MarshalPKIXPublicKey(key.Public())
	if err != nil {
		return fmt.Errorf("encoding service account public key: %w", err)
	}
	return keyPair{cert: pemBlock("PUBLIC KEY", pub), key: keyPEM}.write(base)
}

func certTemplate(commonName string) *x509.Certificate {
	serial, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	now := time.Now()
	return &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: commonName},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(7 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
	}
}

func privateKeyPEM(key *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("encoding private key: %w", err)
	}
	return pemBlock("EC PRIVATE KEY", der), nil
}

func pemBlock(kind string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der})
}
