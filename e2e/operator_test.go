//go:build e2e

package e2e

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/rest"

	"github.com/stencil-operator/stencil/internal/localcluster"
)

// operatorProbe is where the shared operator serves /readyz.
const operatorProbe = "127.0.0.1:18081"

// startOperator runs the real bin/stencil out of cluster as the
// ServiceAccount stencil-system/stencil, bound only to config/rbac, so the
// whole suite proves the RBAC. It returns a function that stops it.
func startOperator() (stop func(), logPath string, err error) {
	if out, err := kubectlAdmin("create", "namespace", "stencil-system"); err != nil {
		return nil, "", fmt.Errorf("%w: %s", err, out)
	}
	if out, err := kubectlAdmin("apply", "--server-side", "-k", "../config/rbac"); err != nil {
		return nil, "", fmt.Errorf("%w: %s", err, out)
	}
	token, err := kubectlAdmin("create", "token", "stencil", "-n", "stencil-system", "--duration=2h")
	if err != nil {
		return nil, "", fmt.Errorf("%w: %s", err, token)
	}
	kubeconfig := filepath.Join(cluster.Dir, "stencil-sa.kubeconfig")
	cfg := &rest.Config{Host: cluster.Config.Host, BearerToken: strings.TrimSpace(token)}
	cfg.CAData = cluster.Config.CAData
	if err := localcluster.WriteKubeconfig(cfg, kubeconfig); err != nil {
		return nil, "", err
	}
	logPath = filepath.Join(cluster.Dir, "logs", "stencil.log")
	log, err := os.Create(logPath)
	if err != nil {
		return nil, "", err
	}
	cmd := exec.Command(filepath.Join(binDir, "stencil"), "--metrics-bind-address=0", "--health-probe-bind-address="+operatorProbe)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, "", fmt.Errorf("starting bin/stencil (did `make build` run?): %w", err)
	}
	stop = func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
		_ = log.Close()
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get("http://" + operatorProbe + "/readyz")
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return stop, logPath, nil
			}
		}
		if time.Now().After(deadline) {
			stop()
			data, _ := os.ReadFile(logPath)
			return nil, "", fmt.Errorf("stencil not ready within 30s: %v\n%s", err, data)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// kubectlAdmin runs bin/kubectl as cluster admin, outside any test.
func kubectlAdmin(args ...string) (string, error) {
	cmd := exec.Command(filepath.Join(binDir, "kubectl"), args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+cluster.Kubeconfig)
	out, err := cmd.CombinedOutput()
	return string(out), err
}
