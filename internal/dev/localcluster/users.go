package localcluster

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// UserConfig returns a client configuration that authenticates as user name
// in groups, with a client certificate signed by the cluster's CA. What the
// user may do is up to RBAC ("system:masters" may do everything).
func (c *Cluster) UserConfig(name string, groups ...string) (*rest.Config, error) {
	pair, err := c.ca.client(name, groups...)
	if err != nil {
		return nil, err
	}
	return &rest.Config{
		Host: c.Server,
		TLSClientConfig: rest.TLSClientConfig{
			CAData:   c.ca.pem,
			CertData: pair.cert,
			KeyData:  pair.key,
		},
	}, nil
}

// WriteKubeconfig writes cfg as a kubeconfig file with one context, "local".
func WriteKubeconfig(cfg *rest.Config, path string) error {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["local"] = &clientcmdapi.Cluster{
		Server:                   cfg.Host,
		CertificateAuthorityData: cfg.CAData,
	}
	kc.AuthInfos["local"] = &clientcmdapi.AuthInfo{
		ClientCertificateData: cfg.CertData,
		ClientKeyData:         cfg.KeyData,
		Token:                 cfg.BearerToken,
	}
	kc.Contexts["local"] = &clientcmdapi.Context{Cluster: "local", AuthInfo: "local", Namespace: "default"}
	kc.CurrentContext = "local"
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		return fmt.Errorf("writing kubeconfig %s: %w", path, err)
	}
	return nil
}

// BinDirEnv names the variable that overrides where the binaries are.
const BinDirEnv = "STENCIL_BIN_DIR"

// BinDir is where `make tools` puts the control plane binaries: $STENCIL_BIN_DIR
// if set, else bin/ at the root of the module that contains the working
// directory.
func BinDir() (string, error) {
	if dir := os.Getenv(BinDirEnv); dir != "" {
		return dir, nil
	}
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("finding the binaries: %w", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return filepath.Join(dir, "bin"), nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("finding the binaries: no go.mod above the working directory; set " + BinDirEnv)
		}
		dir = parent
	}
}
