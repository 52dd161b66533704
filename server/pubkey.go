package server

import (
	"crypto"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
)

// ReadPublicKey reads a PEM file's public key: a PUBLIC KEY (PKIX: Ed25519,
// RSA, ECDSA) or an RSA PUBLIC KEY (PKCS #1). It verifies LibreChat's
// Bearer JWTs (--librechat-jwt-public-key).
func ReadPublicKey(file string) (crypto.PublicKey, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	blk, _ := pem.Decode(b)
	if blk == nil {
		return nil, fmt.Errorf("no PEM block; want a PUBLIC KEY (PKIX) in PEM")
	}
	key, err := x509.ParsePKIXPublicKey(blk.Bytes)
	if err != nil {
		if rk, rerr := x509.ParsePKCS1PublicKey(blk.Bytes); rerr == nil {
			return rk, nil
		}
		return nil, err
	}
	return key, nil
}
