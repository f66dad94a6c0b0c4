//go:build e2e

package e2e

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/rest"

	"github.com/stencil-operator/stencil/internal/dev/localcluster"
)

// operator is one running bin/stencil process.
type operator struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	exited  chan struct{}
	// metrics is the URL of its metrics endpoint: HTTPS, for clients the
	// API server authorizes.
	metrics string
	// started is when it was started.
	started time.Time
}

// saKubeconfig is the kubeconfig of the ServiceAccount stencil-system/stencil,
// saConfig its client configuration.
var (
	saKubeconfig string
	saConfig     *rest.Config
)

// setUpServiceAccount creates the operator's namespace, ServiceAccount and
// RBAC from config/rbac, and a kubeconfig with a token for it, so that the
// suite proves the generated RBAC is enough.
func setUpServiceAccount() error {
	if out, err := kubectlAdmin("create", "namespace", "stencil-system"); err != nil {
		return fmt.Errorf("%w: %s", err, out)
	}
	if out, err := kubectlAdmin("apply", "--server-side", "-k", "../config/rbac"); err != nil {
		return fmt.Errorf("%w: %s", err, out)
	}
	token, err := kubectlAdmin("create", "token", "stencil", "-n", "stencil-system", "--duration=2h")
	if err != nil {
		return fmt.Errorf("%w: %s", err, token)
	}
	saKubeconfig = filepath.Join(cluster.Dir, "stencil-sa.kubeconfig")
	cfg := &rest.Config{Host: cluster.Config.Host, BearerToken: strings.TrimSpace(token)}
	cfg.CAData = cluster.Config.CAData
	saConfig = cfg
	return localcluster.WriteKubeconfig(cfg, saKubeconfig)
}

// startOperator runs the real bin/stencil out of cluster as the
// ServiceAccount, with leader election, and waits for its readiness probe.
// Only the leader reconciles, so several may run at once.
func startOperator(name string) (*operator, error) {
	return startBinary(name, filepath.Join(binDir, "stencil"))
}

// startBinary is startOperator with another build of stencil, and more
// flags.
func startBinary(name, bin string, flags ...string) (*operator, error) {
	return launch(name, bin, saKubeconfig, flags...)
}

// startAs is startOperator as another user.
func startAs(name, kubeconfig string) (*operator, error) {
	return launch(name, filepath.Join(binDir, "stencil"), kubeconfig)
}

func launch(name, bin, kubeconfig string, flags ...string) (*operator, error) {
	webhook, err := freeAddress()
	if err != nil {
		return nil, err
	}
	return launchWith(name, bin, kubeconfig, append([]string{"--webhook-url=https://" + webhook + "/convert"}, flags...)...)
}

// launchWith is launch without the flags of this build beyond an older
// one's (--webhook-url).
func launchWith(name, bin, kubeconfig string, flags ...string) (*operator, error) {
	probe, err := freeAddress()
	if err != nil {
		return nil, err
	}
	metrics, err := freeAddress()
	if err != nil {
		return nil, err
	}
	op := &operator{name: name, logPath: filepath.Join(cluster.Dir, "logs", "stencil-"+name+".log"), exited: make(chan struct{}), metrics: "https://" + metrics + "/metrics", started: time.Now()}
	log, err := os.Create(op.logPath)
	if err != nil {
		return nil, err
	}
	op.cmd = exec.Command(bin, append([]string{"--metrics-bind-address=" + metrics, "--metrics-secure",
		"--health-probe-bind-address=" + probe, "--leader-elect", "--leader-election-namespace=stencil-system"}, flags...)...)
	op.cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	op.cmd.Stdout, op.cmd.Stderr = log, log
	op.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := op.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting bin/stencil (did `make build` run?): %w", err)
	}
	go func() { _ = op.cmd.Wait(); _ = log.Close(); close(op.exited) }()
	running = append(running, op)
	// Ready once its caches are filled (a loaded machine may take a while).
	deadline := time.Now().Add(90 * time.Second)
	for {
		resp, err := http.Get("http://" + probe + "/readyz")
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return op, nil
			}
		}
		if time.Now().After(deadline) {
			op.kill()
			return nil, fmt.Errorf("stencil %s not ready within 90s: %w\n%s", name, err, op.logTail())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// freeAddress is a loopback address with a port free now.
func freeAddress() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer func() { _ = l.Close() }()
	return "127.0.0.1:" + strconv.Itoa(l.Addr().(*net.TCPAddr).Port), nil
}

// stop terminates the operator gracefully.
func (o *operator) stop() {
	_ = o.cmd.Process.Signal(syscall.SIGTERM)
	<-o.exited
}

// kill ends the operator at once, as a crash would.
func (o *operator) kill() {
	_ = o.cmd.Process.Kill()
	<-o.exited
}

func (o *operator) logTail() string {
	data, _ := os.ReadFile(o.logPath)
	return string(tailBytes(data, 4000))
}

// leader is the holder of the operator's Lease.
func leader() string {
	out, _ := kubectlAdmin("-n", "stencil-system", "get", "lease", "stencil.stencil.dev", "-o", "jsonpath={.spec.holderIdentity}")
	return out
}

// kubectlAdmin runs bin/kubectl as cluster admin, outside any test.
func kubectlAdmin(args ...string) (string, error) {
	cmd := exec.Command(filepath.Join(binDir, "kubectl"), args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+cluster.Kubeconfig)
	out, err := cmd.CombinedOutput()
	return string(out), err
}
