//go:build lab

package labtest

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"net"
	"testing"
)

// TestCAIssue: a certificate the CA issues verifies against the CA alone, for its names and
// its extended key usage, and not for another name.
func TestCAIssue(t *testing.T) {
	ca, err := NewCA("test CA")
	if err != nil {
		t.Fatal(err)
	}
	der, key, err := ca.Issue(&x509.Certificate{
		Subject:     pkix.Name{CommonName: "server"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.5")},
		DNSNames:    []string{"kubernetes.default"},
	})
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	if !key.PublicKey.Equal(leaf.PublicKey) {
		t.Error("the certificate is not for the key Issue returned")
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca.Cert)
	for _, name := range []string{"127.0.0.5", "kubernetes.default"} {
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: name, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: "other"}); err == nil {
		t.Error("the certificate verified for a name it does not carry")
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: "127.0.0.5", KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err == nil {
		t.Error("the certificate verified for client authentication, which it was not issued for")
	}
}
