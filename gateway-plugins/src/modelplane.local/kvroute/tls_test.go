package kvroute

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// issue makes a certificate for name signed by parent (self-signed CA when parent is nil), as PEM.
func issue(t *testing.T, name string, parent *x509.Certificate, parentKey *ecdsa.PrivateKey, ca bool) (
	*x509.Certificate, *ecdsa.PrivateKey, []byte, []byte) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), DNSNames: []string{name},
		IsCA: ca, BasicConstraintsValid: true,
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	keyDer, _ := x509.MarshalECPrivateKey(key)
	return cert, key, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDer})
}

func TestTheControlPlaneDialsClustersOverMutualTLS(t *testing.T) {
	dir := t.TempDir()
	ca, caKey, caPEM, _ := issue(t, "hop-ca", nil, nil, true)
	_, _, srvPEM, srvKey := issue(t, "east.gateway.modelplane.internal", ca, caKey, false)
	_, _, cliPEM, cliKey := issue(t, "control-plane", ca, caKey, false)
	files := map[string][]byte{"ca.crt": caPEM, "cli.crt": cliPEM, "cli.key": cliKey}
	for n, b := range files {
		if err := os.WriteFile(filepath.Join(dir, n), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	srvCert, err := tls.X509KeyPair(srvPEM, srvKey)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	var clients []string
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(rw http.ResponseWriter, req *http.Request) {
		clients = append(clients, req.TLS.PeerCertificates[0].Subject.CommonName)
		_, _ = rw.Write([]byte("ok"))
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{srvCert}, ClientCAs: pool,
		ClientAuth: tls.RequireAndVerifyClientCert}
	srv.StartTLS()
	defer srv.Close()
	hop := &TLSConfig{CAFile: filepath.Join(dir, "ca.crt"), CertFile: filepath.Join(dir, "cli.crt"),
		KeyFile: filepath.Join(dir, "cli.key")}
	for _, c := range []struct {
		name, serverName string
		status           int
	}{{"the name the certificate carries", "east.gateway.modelplane.internal", http.StatusOK},
		{"another name: refused, as every cluster", "west.gateway.modelplane.internal", http.StatusServiceUnavailable}} {
		cfg := CreateConfig()
		cfg.SummaryIntervalS = 0
		cfg.TLS = hop
		cfg.Clusters = []ClusterConfig{{Name: "east", URL: srv.URL, Weight: 1, ServerName: c.serverName}}
		h, err := New(context.Background(), nil, cfg, "cp")
		if err != nil {
			t.Fatal(err)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/v1/chat/completions", bytes.NewReader([]byte("{}"))))
		if rec.Code != c.status {
			t.Fatalf("%s: status %d, want %d", c.name, rec.Code, c.status)
		}
	}
	if len(clients) == 0 || clients[0] != "control-plane" {
		t.Fatalf("the gateway saw client certificates %v", clients)
	}
	for _, bad := range []*TLSConfig{{CAFile: hop.CAFile}, {CAFile: filepath.Join(dir, "none"), CertFile: hop.CertFile,
		KeyFile: hop.KeyFile}, {CAFile: hop.CertFile, CertFile: hop.CertFile, KeyFile: hop.CAFile}} {
		cfg := CreateConfig()
		cfg.TLS = bad
		cfg.Clusters = []ClusterConfig{{Name: "east", URL: srv.URL, Weight: 1}}
		if _, err := New(context.Background(), nil, cfg, "cp"); err == nil {
			t.Fatalf("tls %+v accepted", *bad)
		}
	}
}
