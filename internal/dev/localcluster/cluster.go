package localcluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// Options shape a local control plane. The zero value is usable.
type Options struct {
	// BinDir holds the binaries; empty means [BinDir]().
	BinDir string
	// Dir holds certificates, data, logs and kubeconfigs. Empty means a new
	// temporary folder that Stop removes.
	Dir string
	// Nodes is the number of fake (kwok) nodes; 0 means 1.
	Nodes int
	// APIServerFlags are extra kube-apiserver flags, such as audit logging.
	APIServerFlags []string
	// APIServerOnly starts only etcd and kube-apiserver: no controllers, no
	// scheduler, no nodes. Benchmarks use it to measure an operator's own
	// API cost without the Deployment controller's traffic.
	APIServerOnly bool
}

// Cluster is a running local control plane.
type Cluster struct {
	// Dir holds certificates, data, logs and kubeconfigs.
	Dir string
	// Server is the API server's URL.
	Server string
	// Kubeconfig is the path of a cluster-admin kubeconfig.
	Kubeconfig string
	// Config is a cluster-admin client configuration.
	Config *rest.Config

	ca        *authority
	processes []*process
	removeDir bool
	restarts  int // how many times Restart ran (numbers the logs)
}

// startTimeout bounds how long each component may take to become ready.
const startTimeout = 2 * time.Minute

// Start brings up etcd, kube-apiserver, kube-controller-manager,
// kube-scheduler and kwok with opts.Nodes ready fake nodes (or only etcd and
// kube-apiserver with opts.APIServerOnly). On error nothing is left running.
func Start(ctx context.Context, opts Options) (_ *Cluster, err error) {
	c, err := newCluster(opts)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, c.Stop())
		}
	}()
	bin := opts.BinDir
	if bin == "" {
		if bin, err = BinDir(); err != nil {
			return nil, err
		}
	}
	etcdURL, err := c.startEtcd(ctx, bin)
	if err != nil {
		return nil, err
	}
	if err := c.startAPIServer(ctx, bin, etcdURL, opts.APIServerFlags); err != nil {
		return nil, err
	}
	if opts.APIServerOnly {
		return c, nil
	}
	if err := c.startControllers(ctx, bin); err != nil {
		return nil, err
	}
	if err := c.startNodes(ctx, bin, max(opts.Nodes, 1)); err != nil {
		return nil, err
	}
	return c, nil
}

func newCluster(opts Options) (*Cluster, error) {
	c := &Cluster{Dir: opts.Dir}
	if c.Dir == "" {
		removeAbandoned()
		dir, err := os.MkdirTemp("", tempPrefix)
		if err != nil {
			return nil, fmt.Errorf("creating cluster folder: %w", err)
		}
		c.Dir, c.removeDir = dir, true
		pid := []byte(strconv.Itoa(os.Getpid()))
		if err := os.WriteFile(c.path(ownerFile), pid, 0o600); err != nil {
			return nil, fmt.Errorf("writing cluster owner: %w", err)
		}
	}
	for _, sub := range []string{"pki", "logs", "etcd"} {
		if err := os.MkdirAll(filepath.Join(c.Dir, sub), 0o700); err != nil {
			return nil, fmt.Errorf("creating cluster folder: %w", err)
		}
	}
	ca, err := newAuthority()
	if err != nil {
		return nil, err
	}
	c.ca = ca
	if err := os.WriteFile(c.path("pki", "ca.crt"), ca.pem, 0o600); err != nil {
		return nil, fmt.Errorf("writing CA: %w", err)
	}
	return c, nil
}

// Stop terminates every component, newest first, and removes the cluster's
// folder if Start created it. It is safe to call more than once.
func (c *Cluster) Stop() error {
	var errs []error
	for _, p := range slices.Backward(c.processes) {
		errs = append(errs, p.stop(10*time.Second))
	}
	c.processes = nil
	if c.removeDir {
		errs = append(errs, os.RemoveAll(c.Dir))
		c.removeDir = false
	}
	return errors.Join(errs...)
}

// LogDir is where each component writes its log, one file per component.
func (c *Cluster) LogDir() string { return c.path("logs") }

func (c *Cluster) path(parts ...string) string {
	return filepath.Join(append([]string{c.Dir}, parts...)...)
}

func (c *Cluster) start(name, binary string, args ...string) error {
	p, err := startProcess(name, binary, c.path("logs", name+".log"), args...)
	if err != nil {
		return err
	}
	c.processes = append(c.processes, p)
	return nil
}

// startEtcd starts etcd on free ports. A port is free when chosen, but
// another process (any client's outgoing connection) may take it before
// etcd binds it; etcd then exits, and is started again on others.
func (c *Cluster) startEtcd(ctx context.Context, bin string) (string, error) {
	for attempt := 1; ; attempt++ {
		url, err := c.startEtcdOnce(ctx, bin)
		if err == nil || attempt == 3 || !c.portTaken("etcd") {
			return url, err
		}
		last := c.processes[len(c.processes)-1]
		_ = last.stop(time.Second)
		c.processes = c.processes[:len(c.processes)-1]
		if err := os.RemoveAll(c.path("etcd")); err != nil {
			return "", err
		}
	}
}

// portTaken: the component's log says a port it was given was in use.
func (c *Cluster) portTaken(name string) bool {
	log, err := os.ReadFile(c.path("logs", name+".log"))
	return err == nil && strings.Contains(string(log), "address already in use")
}

func (c *Cluster) startEtcdOnce(ctx context.Context, bin string) (string, error) {
	ports, err := freePorts(2)
	if err != nil {
		return "", err
	}
	clientURL, peerPort := "http://127.0.0.1:"+ports[0], ports[1]
	err = c.start("etcd", filepath.Join(bin, "etcd"),
		"--data-dir="+c.path("etcd"),
		"--listen-client-urls="+clientURL,
		"--advertise-client-urls="+clientURL,
		"--listen-peer-urls=http://127.0.0.1:"+peerPort,
		"--initial-advertise-peer-urls=http://127.0.0.1:"+peerPort,
		"--initial-cluster=default=http://127.0.0.1:"+peerPort,
		"--unsafe-no-fsync=true",
		"--log-level=warn",
	)
	if err != nil {
		return "", err
	}
	return clientURL, c.waitFor(ctx, "etcd", func(ctx context.Context) error {
		return httpOK(ctx, http.DefaultClient, clientURL+"/health")
	})
}

func (c *Cluster) startAPIServer(ctx context.Context, bin, etcdURL string, extra []string) error {
	serving, err := c.ca.serving()
	if err != nil {
		return err
	}
	if err := serving.write(c.path("pki", "apiserver")); err != nil {
		return err
	}
	if err := serviceAccountKeys(c.path("pki", "sa")); err != nil {
		return err
	}
	ports, err := freePorts(1)
	if err != nil {
		return err
	}
	port := ports[0]
	c.Server = "https://127.0.0.1:" + port
	args := append([]string{
		"--etcd-servers=" + etcdURL,
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--secure-port=" + port,
		"--tls-cert-file=" + c.path("pki", "apiserver.crt"),
		"--tls-private-key-file=" + c.path("pki", "apiserver.key"),
		"--client-ca-file=" + c.path("pki", "ca.crt"),
		"--service-account-key-file=" + c.path("pki", "sa.crt"),
		"--service-account-signing-key-file=" + c.path("pki", "sa.key"),
		"--service-account-issuer=" + c.Server,
		"--service-cluster-ip-range=10.96.0.0/16",
		"--authorization-mode=RBAC",
		"--allow-privileged=true",
		"--endpoint-reconciler-type=none",
		"--cert-dir=" + c.path("pki"),
	}, extra...)
	if err := c.start("kube-apiserver", filepath.Join(bin, "kube-apiserver"), args...); err != nil {
		return err
	}
	if c.Config, err = c.UserConfig("stencil-admin", "system:masters"); err != nil {
		return err
	}
	c.Kubeconfig = c.path("admin.kubeconfig")
	if err := WriteKubeconfig(c.Config, c.Kubeconfig); err != nil {
		return err
	}
	transport, err := rest.TransportFor(c.Config)
	if err != nil {
		return fmt.Errorf("building admin transport: %w", err)
	}
	client := &http.Client{Transport: transport, Timeout: 5 * time.Second}
	return c.waitFor(ctx, "kube-apiserver", func(ctx context.Context) error {
		return httpOK(ctx, client, c.Server+"/readyz")
	})
}

// startControllers starts kube-controller-manager (garbage collection, the
// Deployment→ReplicaSet→Pod chain, service accounts) and kube-scheduler.
func (c *Cluster) startControllers(ctx context.Context, bin string) error {
	ports, err := freePorts(1)
	if err != nil {
		return err
	}
	err = c.start("kube-controller-manager", filepath.Join(bin, "kube-controller-manager"),
		"--kubeconfig="+c.Kubeconfig,
		"--secure-port=0",
		"--leader-elect=false",
		"--service-account-private-key-file="+c.path("pki", "sa.key"),
		"--root-ca-file="+c.path("pki", "ca.crt"),
		"--use-service-account-credentials=false",
		"--controllers=*",
	)
	if err != nil {
		return err
	}
	err = c.start("kube-scheduler", filepath.Join(bin, "kube-scheduler"),
		"--kubeconfig="+c.Kubeconfig,
		"--authentication-kubeconfig="+c.Kubeconfig,
		"--authorization-kubeconfig="+c.Kubeconfig,
		"--bind-address=127.0.0.1",
		"--secure-port="+ports[0],
		"--leader-elect=false",
	)
	if err != nil {
		return err
	}
	clients, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		return fmt.Errorf("building admin client: %w", err)
	}
	// The service account controller creating "default" proves the
	// controller manager is up and running its controllers.
	return c.waitFor(ctx, "kube-controller-manager", func(ctx context.Context) error {
		_, err := clients.CoreV1().ServiceAccounts(metav1.NamespaceDefault).Get(ctx, "default", metav1.GetOptions{})
		return err
	})
}

// startNodes starts kwok and registers n fake nodes for it to keep Ready.
func (c *Cluster) startNodes(ctx context.Context, bin string, n int) error {
	err := c.start("kwok", filepath.Join(bin, "kwok"),
		"--kubeconfig="+c.Kubeconfig,
		"--config="+filepath.Join(bin, "kwok-stages.yaml"),
		"--manage-all-nodes=false",
		"--manage-nodes-with-annotation-selector="+fakeNodeAnnotation+"=fake",
		"--node-lease-duration-seconds=40",
		"--cidr=10.244.0.0/16",
		"--node-ip=127.0.0.1",
	)
	if err != nil {
		return err
	}
	clients, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		return fmt.Errorf("building admin client: %w", err)
	}
	for i := range n {
		node := fakeNode("kwok-node-" + strconv.Itoa(i))
		if _, err := clients.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating node %s: %w", node.Name, err)
		}
		err := c.waitFor(ctx, "node "+node.Name, func(ctx context.Context) error {
			live, err := clients.CoreV1().Nodes().Get(ctx, node.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			return nodeReady(live)
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// fakeNodeAnnotation marks the nodes that kwok manages.
const fakeNodeAnnotation = "kwok.x-k8s.io/node"

func fakeNode(name string) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Annotations: map[string]string{fakeNodeAnnotation: "fake"},
			Labels: map[string]string{
				"type":                   "kwok",
				"kubernetes.io/hostname": name,
				"kubernetes.io/os":       "linux",
				"kubernetes.io/arch":     "amd64",
			},
		},
		// As kwok's stage would set them, and ephemeral storage too, which
		// charts request (bitnami's resource presets): a node without it
		// schedules none of their pods.
		Status: corev1.NodeStatus{Capacity: fakeNodeResources, Allocatable: fakeNodeResources},
	}
}

var fakeNodeResources = corev1.ResourceList{
	corev1.ResourceCPU:              resource.MustParse("1k"),
	corev1.ResourceMemory:           resource.MustParse("1Ti"),
	corev1.ResourcePods:             resource.MustParse("1M"),
	corev1.ResourceEphemeralStorage: resource.MustParse("1Ti"),
}

func nodeReady(node *corev1.Node) error {
	for _, cond := range node.Status.Conditions {
		if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
			return nil
		}
	}
	return fmt.Errorf("node %s is not Ready yet", node.Name)
}

// waitFor polls check until it succeeds, failing fast when a component dies.
func (c *Cluster) waitFor(ctx context.Context, what string, check func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	for {
		for _, p := range c.processes {
			if err := p.running(); err != nil {
				return fmt.Errorf("waiting for %s: %w", what, err)
			}
		}
		last := check(ctx)
		if last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w (last error: %w)", what, ctx.Err(), last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func httpOK(ctx context.Context, client *http.Client, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return nil
}

// freePorts asks the kernel for n distinct free loopback ports.
func freePorts(n int) ([]string, error) {
	ports := make([]string, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("finding a free port: %w", err)
		}
		defer func() { _ = l.Close() }() // held until all n are chosen, so they differ.
		ports = append(ports, strconv.Itoa(l.Addr().(*net.TCPAddr).Port))
	}
	return ports, nil
}

const (
	tempPrefix = "stencil-cluster-"
	ownerFile  = "owner.pid"
)

// removeAbandoned deletes temporary cluster folders whose program died
// without calling Stop (its processes died with it, its files did not).
func removeAbandoned() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), tempPrefix+"*"))
	for _, dir := range dirs {
		data, err := os.ReadFile(filepath.Join(dir, ownerFile))
		if err != nil {
			continue
		}
		pid, err := strconv.Atoi(string(data))
		if err != nil || pid == os.Getpid() {
			continue
		}
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			_ = os.RemoveAll(dir)
		}
	}
}
