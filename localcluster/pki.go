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
	"path/filepath"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// certValidity is generous: a cluster's PKI lives as long as its state dir.
const certValidity = 10 * 365 * 24 * time.Hour

// authority is a self-signed CA that issues the cluster's serving and client
// certificates.
type authority struct {
	cert *x509.Certificate
	key  crypto.Signer
	pem  []byte
}

func newAuthority() (*authority, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate CA key: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "flock-local-ca"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(certValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, fmt.Errorf("sign CA: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("parse CA: %w", err)
	}
	return &authority{cert: cert, key: key, pem: pemBlock("CERTIFICATE", der)}, nil
}

// loadAuthority reads the CA that writePKI kept in pki.
func loadAuthority(pki string) (*authority, error) {
	certPEM, err := os.ReadFile(filepath.Join(pki, "ca.crt"))
	if err != nil {
		return nil, fmt.Errorf("read CA: %w", err)
	}
	keyPEM, err := os.ReadFile(filepath.Join(pki, "ca.key"))
	if err != nil {
		return nil, fmt.Errorf("read CA key: %w", err)
	}
	cb, _ := pem.Decode(certPEM)
	kb, _ := pem.Decode(keyPEM)
	if cb == nil || kb == nil {
		return nil, fmt.Errorf("CA in %s: no PEM data", pki)
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, fmt.Errorf("parse CA: %w", err)
	}
	key, err := x509.ParsePKCS8PrivateKey(kb.Bytes)
	if err != nil {
		return nil, fmt.Errorf("parse CA key: %w", err)
	}
	signer, ok := key.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("CA key in %s cannot sign", pki)
	}
	return &authority{cert: cert, key: signer, pem: certPEM}, nil
}

// issue returns PEM certificate and key for a leaf. With hosts it is a serving
// certificate for those DNS names and IPs; with groups it is a client
// certificate for user cn in those groups (Kubernetes reads O as groups).
func (a *authority) issue(cn string, groups, hosts []string) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generate key for %s: %w", cn, err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: cn, Organization: groups},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(certValidity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if len(hosts) > 0 {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		for _, h := range hosts {
			if ip := net.ParseIP(h); ip != nil {
				tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
			} else {
				tmpl.DNSNames = append(tmpl.DNSNames, h)
			}
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, a.cert, key.Public(), a.key)
	if err != nil {
		return nil, nil, fmt.Errorf("sign certificate for %s: %w", cn, err)
	}
	keyPEM, err = encodeKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pemBlock("CERTIFICATE", der), keyPEM, nil
}

func encodeKey(key crypto.Signer) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("encode private key: %w", err)
	}
	return pemBlock("PRIVATE KEY", der), nil
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	if err != nil {
		panic(err) // crypto/rand does not fail on supported platforms
	}
	return n
}

func pemBlock(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}

// writePKI generates everything the control plane needs into dir/pki and one
// kubeconfig per client identity into dir, pointing at server. The real
// nodes' kubelets get theirs from writeNodePKI.
func writePKI(dir, server string, clients map[string]clientIdentity) error {
	pki := filepath.Join(dir, "pki")
	if err := os.MkdirAll(pki, 0o700); err != nil {
		return fmt.Errorf("create pki dir: %w", err)
	}
	ca, err := newAuthority()
	if err != nil {
		return err
	}
	caKey, err := encodeKey(ca.key)
	if err != nil {
		return err
	}
	files := map[string][]byte{"ca.crt": ca.pem, "ca.key": caKey}
	files["apiserver.crt"], files["apiserver.key"], err = ca.issue("kube-apiserver", nil, []string{
		"127.0.0.1", "localhost", serviceClusterIP, ControlPlaneIP,
		"kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc." + Domain,
	})
	if err != nil {
		return err
	}
	// The apiserver's logs/exec/port-forward requests to the kubelets.
	if files["apiserver-kubelet-client.crt"], files["apiserver-kubelet-client.key"], err = ca.issue(
		"kube-apiserver-kubelet-client", []string{"system:masters"}, nil); err != nil {
		return err
	}
	saKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("generate service account key: %w", err)
	}
	if files["sa.key"], err = encodeKey(saKey); err != nil {
		return err
	}
	saPub, err := x509.MarshalPKIXPublicKey(saKey.Public())
	if err != nil {
		return fmt.Errorf("encode service account public key: %w", err)
	}
	files["sa.pub"] = pemBlock("PUBLIC KEY", saPub)
	for name, f := range files {
		if err := os.WriteFile(filepath.Join(pki, name), f, 0o600); err != nil {
			return fmt.Errorf("write %s: %w", name, err)
		}
	}
	for file, id := range clients {
		cert, key, err := ca.issue(id.user, id.groups, nil)
		if err != nil {
			return err
		}
		if err := writeKubeconfig(filepath.Join(dir, file), server, ca.pem, cert, key); err != nil {
			return err
		}
	}
	return nil
}

// writeNodePKI issues node n's kubelet credentials from the cluster's CA in
// stateDir/pki: its serving certificate (pki/kubelet-<name>.crt, for the
// apiserver's logs, exec and port-forward requests) and its kubeconfig as
// system:node:<name> (config/kubelet-<name>.kubeconfig), pointing at server.
func writeNodePKI(stateDir, server string, n *RealNode) error {
	pki := filepath.Join(stateDir, "pki")
	ca, err := loadAuthority(pki)
	if err != nil {
		return err
	}
	cert, key, err := ca.issue("kubelet-"+n.Name, nil, []string{"localhost", n.Name, n.IP})
	if err != nil {
		return err
	}
	for file, b := range map[string][]byte{"kubelet-" + n.Name + ".crt": cert, "kubelet-" + n.Name + ".key": key} {
		if err := os.WriteFile(filepath.Join(pki, file), b, 0o600); err != nil {
			return fmt.Errorf("write %s: %w", file, err)
		}
	}
	if cert, key, err = ca.issue("system:node:"+n.Name, []string{"system:nodes"}, nil); err != nil {
		return err
	}
	return writeKubeconfig(n.kubeconfig(stateDir), server, ca.pem, cert, key)
}

// clientIdentity is the user and groups of a client certificate.
type clientIdentity struct {
	user   string
	groups []string
}

func writeKubeconfig(path, server string, ca, cert, key []byte) error {
	const name = "flock-local"
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[name] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: ca}
	cfg.AuthInfos[name] = &clientcmdapi.AuthInfo{ClientCertificateData: cert, ClientKeyData: key}
	cfg.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name}
	cfg.CurrentContext = name
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return fmt.Errorf("write kubeconfig %s: %w", path, err)
	}
	return os.Chmod(path, 0o600)
}
