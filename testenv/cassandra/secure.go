package cassandra

import (
	"bytes"
	"context"
	"crypto/x509"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// keystorePassword protects a Secure node's throw-away keystores (test
// material in the run directory, removed by Stop).
const keystorePassword = "cqlseq-test"

// The superuser of a Secure node (Cassandra's default role).
const (
	Superuser         = "cassandra"
	SuperuserPassword = "cassandra"
)

// makeKeystore makes, with keytool in dir/tls: a CA (ca.jks, its
// certificate ca.pem) and the node's key with a certificate for 127.0.0.1
// (IP SAN, server auth) signed by it, in keystore.jks with the CA's
// chain. It returns the keystore's and ca.pem's paths.
func makeKeystore(ctx context.Context, o Options, dir string) (keystore, caPEM string, err error) {
	d := filepath.Join(dir, "tls")
	if err := os.MkdirAll(d, 0o700); err != nil {
		return "", "", fmt.Errorf("cassandra: %w", err)
	}
	kt := "keytool"
	if filepath.IsAbs(o.Java) {
		kt = filepath.Join(filepath.Dir(o.Java), "keytool")
	}
	ca, ks := filepath.Join(d, "ca.jks"), filepath.Join(d, "keystore.jks")
	caPEM, csr, cert := filepath.Join(d, "ca.pem"), filepath.Join(d, "node.csr"), filepath.Join(d, "node.pem")
	pw := []string{"-storepass", keystorePassword, "-keypass", keystorePassword, "-storetype", "JKS", "-noprompt"}
	steps := [][]string{
		{"-genkeypair", "-alias", "ca", "-keyalg", "RSA", "-keysize", "2048", "-validity", "3650", "-dname", "CN=cqlseq test CA", "-ext", "bc:c", "-keystore", ca},
		{"-exportcert", "-rfc", "-alias", "ca", "-keystore", ca, "-file", caPEM},
		{"-genkeypair", "-alias", "node", "-keyalg", "RSA", "-keysize", "2048", "-validity", "3650", "-dname", "CN=127.0.0.1", "-keystore", ks},
		{"-certreq", "-alias", "node", "-keystore", ks, "-file", csr},
		{"-gencert", "-rfc", "-alias", "ca", "-keystore", ca, "-infile", csr, "-outfile", cert, "-validity", "3650",
			"-ext", "SAN=ip:127.0.0.1", "-ext", "ku:c=digitalSignature,keyEncipherment", "-ext", "eku=serverAuth"},
		{"-importcert", "-alias", "ca", "-file", caPEM, "-keystore", ks},
		{"-importcert", "-alias", "node", "-file", cert, "-keystore", ks},
	}
	for _, args := range steps {
		cmd := exec.CommandContext(ctx, kt, append(args, pw...)...)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			return "", "", fmt.Errorf("cassandra: keytool %s: %w: %s", args[0], err, bytes.TrimSpace(out.Bytes()))
		}
	}
	return ks, caPEM, nil
}

// caPool reads a PEM file of CA certificates.
func caPool(path string) (*x509.CertPool, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("cassandra: %w", err)
	}
	p := x509.NewCertPool()
	if !p.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("cassandra: no PEM certificate in %s", path)
	}
	return p, nil
}
