//go:build lab

package labtest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"time"
)

// CA is a certificate authority a lab test makes for its servers (the apiserver of the
// Kubernetes guest, tlshd): an ECDSA P-256 key and a self-signed certificate, valid from an
// hour before it was made (the guest's clock may lag the host's) for a day.
type CA struct {
	Cert *x509.Certificate
	DER  []byte
	key  *ecdsa.PrivateKey
	next int64 // the next serial number
}

// NewCA makes a CA whose certificate names it name.
func NewCA(name string) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
	}
	validity(tmpl)
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &CA{Cert: cert, DER: der, key: key, next: 2}, nil
}

// Issue makes a key and a certificate for it with tmpl's subject, names and extended key
// usages, signed by the CA, with the CA's validity. It returns the certificate's DER and the
// key.
func (ca *CA) Issue(tmpl *x509.Certificate) ([]byte, *ecdsa.PrivateKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	leaf := *tmpl
	leaf.SerialNumber = big.NewInt(ca.next)
	ca.next++
	leaf.KeyUsage = x509.KeyUsageDigitalSignature
	validity(&leaf)
	der, err := x509.CreateCertificate(rand.Reader, &leaf, ca.Cert, &key.PublicKey, ca.key)
	if err != nil {
		return nil, nil, err
	}
	return der, key, nil
}

// CertPEM encodes a certificate's DER as PEM.
func CertPEM(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func validity(c *x509.Certificate) {
	now := time.Now()
	c.NotBefore, c.NotAfter = now.Add(-time.Hour), now.Add(24*time.Hour)
}
