// Command pki writes the throwaway PKI of the integration test cluster into a
// directory: one CA that signs the apiserver's and the gateway's serving certs
// and the x509 client certs (test users, kubelets, control-plane components),
// plus the service-account signing key pair. kube-controller-manager signs
// certificate requests with the same CA.
//
// It is idempotent: a file that already exists is kept, so certificates handed
// to running processes or tests stay valid across repeated `up`s. Leaf certs
// are only (re)issued when missing or not signed by the CA on disk.
//
// Usage: pki DIR
package main

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// Long enough that a developer's checkout never sees an expiry.
const validity = 10 * 365 * 24 * time.Hour

type leaf struct {
	name   string // file stem: NAME.crt / NAME.key
	cn     string
	orgs   []string
	server bool
	dns    []string
	ips    []net.IP
}

var loopbackIPs = []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("::1")}

var leaves = []leaf{
	{name: "apiserver", cn: "kube-apiserver", server: true, ips: loopbackIPs,
		dns: []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"}},
	{name: "levee", cn: "levee", server: true, ips: loopbackIPs, dns: []string{"localhost"}},
	// Client certs: CN is the user name, O the groups (the apiserver's x509 authenticator).
	{name: "admin", cn: "admin", orgs: []string{"system:masters"}},
	{name: "alice", cn: "alice"},
	{name: "bob", cn: "bob"},
	// Kubelets as the Node authorizer knows them: user system:node:NAME in group system:nodes.
	{name: "node-a", cn: "system:node:node-a", orgs: []string{"system:nodes"}},
	{name: "node-b", cn: "system:node:node-b", orgs: []string{"system:nodes"}},
	// The control plane, which reaches the apiserver through the environment's Levee: the users
	// kube-apiserver's bootstrap RBAC grants the controller manager's and the scheduler's rights to,
	// and KWOK's node and pod simulator, bound to KWOK's own ClusterRole by testenv.
	{name: "kube-controller-manager", cn: "system:kube-controller-manager"},
	{name: "kube-scheduler", cn: "system:kube-scheduler"},
	{name: "kwok", cn: "kwok-controller"},
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: pki DIR")
		os.Exit(2)
	}
	if err := run(os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "pki:", err)
		os.Exit(1)
	}
}

func run(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	caCert, caKey, err := loadOrCreateCA(dir)
	if err != nil {
		return err
	}
	for _, l := range leaves {
		if issuedBy(filepath.Join(dir, l.name+".crt"), caCert) && exists(filepath.Join(dir, l.name+".key")) {
			continue
		}
		if err := issue(dir, l, caCert, caKey); err != nil {
			return fmt.Errorf("%s: %w", l.name, err)
		}
	}
	return serviceAccountKeys(dir)
}

func loadOrCreateCA(dir string) (*x509.Certificate, crypto.Signer, error) {
	crtPath, keyPath := filepath.Join(dir, "ca.crt"), filepath.Join(dir, "ca.key")
	if exists(crtPath) && exists(keyPath) {
		return loadCA(crtPath, keyPath)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "levee-test-ca"},
		NotBefore:             time.Now().Add(-time.Hour), // tolerate small clock skew
		NotAfter:              time.Now().Add(validity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, nil, err
	}
	// Key first: a crash in between leaves no CA cert without its key.
	if err := writeKey(keyPath, key); err != nil {
		return nil, nil, err
	}
	if err := writePEM(crtPath, "CERTIFICATE", der, 0o644); err != nil {
		return nil, nil, err
	}
	cert, err := x509.ParseCertificate(der)
	return cert, key, err
}

func loadCA(crtPath, keyPath string) (*x509.Certificate, crypto.Signer, error) {
	crtDER, err := readPEM(crtPath)
	if err != nil {
		return nil, nil, err
	}
	cert, err := x509.ParseCertificate(crtDER)
	if err != nil {
		return nil, nil, err
	}
	keyDER, err := readPEM(keyPath)
	if err != nil {
		return nil, nil, err
	}
	k, err := x509.ParsePKCS8PrivateKey(keyDER)
	if err != nil {
		return nil, nil, err
	}
	signer, ok := k.(crypto.Signer)
	if !ok {
		return nil, nil, errors.New("ca.key is not a signing key")
	}
	return cert, signer, nil
}

func issue(dir string, l leaf, caCert *x509.Certificate, caKey crypto.Signer) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: l.cn, Organization: l.orgs},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(validity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		DNSNames:     l.dns,
		IPAddresses:  l.ips,
	}
	if l.server {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, key.Public(), caKey)
	if err != nil {
		return err
	}
	if err := writeKey(filepath.Join(dir, l.name+".key"), key); err != nil {
		return err
	}
	return writePEM(filepath.Join(dir, l.name+".crt"), "CERTIFICATE", der, 0o644)
}

// serviceAccountKeys writes sa.key/sa.pub. RSA because it is the one key type
// every service-account token consumer accepts (RS256).
func serviceAccountKeys(dir string) error {
	keyPath, pubPath := filepath.Join(dir, "sa.key"), filepath.Join(dir, "sa.pub")
	if exists(keyPath) && exists(pubPath) {
		return nil
	}
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return err
	}
	if err := writeKey(keyPath, key); err != nil {
		return err
	}
	pub, err := x509.MarshalPKIXPublicKey(key.Public())
	if err != nil {
		return err
	}
	return writePEM(pubPath, "PUBLIC KEY", pub, 0o644)
}

func writeKey(path string, key crypto.Signer) error {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return err
	}
	return writePEM(path, "PRIVATE KEY", der, 0o600)
}

// writePEM writes via a temp file and rename so a reader never sees half a file.
func writePEM(path, typ string, der []byte, mode os.FileMode) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), mode); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

func readPEM(path string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	block, _ := pem.Decode(data)
	if block == nil {
		return nil, fmt.Errorf("%s: no PEM block", path)
	}
	return block.Bytes, nil
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic(err)
	}
	return n
}

// issuedBy reports whether path holds a cert signed by ca; a leaf left over from
// a deleted CA is reissued rather than kept.
func issuedBy(path string, ca *x509.Certificate) bool {
	der, err := readPEM(path)
	if err != nil {
		return false
	}
	cert, err := x509.ParseCertificate(der)
	return err == nil && cert.CheckSignatureFrom(ca) == nil
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
