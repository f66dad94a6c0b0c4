package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	operatorv1 "github.com/stencil-operator/stencil/api/operator/v1"
	"github.com/stencil-operator/stencil/api/v1alpha1"
	"github.com/stencil-operator/stencil/internal/dev/localcluster"
	"github.com/stencil-operator/stencil/internal/testing/samples"
	"github.com/stencil-operator/stencil/internal/testing/testutil"
)

// nodePortFirst and nodePortLast bound the API server's node port range: each MyWeb needs its own
// node port, so it is wider than the default (30000-32767).
const nodePortFirst, nodePortLast = 30000, 49999

// maxMyWebs is how many MyWebs fit.
const maxMyWebs = nodePortLast - nodePortFirst + 1

// auditPolicy records, at Metadata level, every request of the users the
// contenders connect as, and nothing else.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Metadata
  users: [stencil, stencil-alone, stencil-chart, rawapply, crbaseline, kro, myweb-apply, myweb-get-update, helm-operator]
- level: None
`

// env is one fresh control plane with the CRDs and the namespaces, and a
// kubeconfig for the contender's own user.
type env struct {
	dir        string
	cluster    *localcluster.Cluster
	admin      client.Client
	scheme     *runtime.Scheme
	auditLog   string
	kubeconfig string
	// user is the contender's API user, as the audit log names it.
	user string
	keep bool
}

func startEnv(ctx context.Context, cfg config, user string) (_ *env, err error) {
	dir, err := os.MkdirTemp("", "stencil-bench-")
	if err != nil {
		return nil, err
	}
	e := &env{dir: dir, auditLog: filepath.Join(dir, "audit.log"), user: user, keep: cfg.keep}
	defer func() {
		if err != nil {
			err = errors.Join(err, e.stop())
		}
	}()
	policy := filepath.Join(dir, "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte(auditPolicy), 0o600); err != nil {
		return nil, err
	}
	e.cluster, err = localcluster.Start(ctx, localcluster.Options{
		BinDir:        cfg.bin,
		Dir:           filepath.Join(dir, "cluster"),
		APIServerOnly: true,
		APIServerFlags: []string{
			"--audit-policy-file=" + policy,
			"--audit-log-path=" + e.auditLog,
			"--audit-log-format=json",
			fmt.Sprintf("--service-node-port-range=%d-%d", nodePortFirst, nodePortLast),
		},
	})
	if err != nil {
		return nil, err
	}
	if err := checkPinned(e.cluster.PIDs()); err != nil {
		return nil, err
	}
	if err := e.setUp(ctx, cfg, user); err != nil {
		return nil, err
	}
	return e, nil
}

func (e *env) setUp(ctx context.Context, cfg config, user string) error {
	e.scheme = runtime.NewScheme()
	if err := errors.Join(clientgoscheme.AddToScheme(e.scheme), apiextensionsv1.AddToScheme(e.scheme), samples.Set().AddTo(e.scheme)); err != nil {
		return err
	}
	var err error
	admin := e.adminConfig()
	if e.admin, err = client.New(admin, client.Options{Scheme: e.scheme}); err != nil {
		return err
	}
	if err := testutil.InstallCRDs(ctx, e.admin, os.DirFS("config/crd/bases")); err != nil {
		return fmt.Errorf("installing CRDs: %w", err)
	}
	for i := range cfg.namespaces {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace(i)}}
		if err := e.admin.Create(ctx, ns); err != nil {
			return fmt.Errorf("creating namespace: %w", err)
		}
	}
	if err := widenNodePorts(ctx, e.admin); err != nil {
		return err
	}
	// The same group for both contenders, so authorization costs the same.
	userCfg, err := e.cluster.UserConfig(user, "system:masters")
	if err != nil {
		return err
	}
	e.kubeconfig = filepath.Join(e.dir, user+".kubeconfig")
	return localcluster.WriteKubeconfig(userCfg, e.kubeconfig)
}

// widenNodePorts raises the MyWeb CRD's bound on spec.nodePortNumber (the
// default range's last port, 32767) to nodePortLast, as for a cluster whose
// node port range is wider, and waits until the API server takes a MyWeb
// with that port. The bench's copy only: the templates are stencil's.
func widenNodePorts(ctx context.Context, c client.Client) error {
	crd := &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: "mywebs." + operatorv1.GroupVersion.Group}}
	patch := fmt.Sprintf(`[{"op":"replace","path":"/spec/versions/0/schema/openAPIV3Schema/properties/spec/properties/nodePortNumber/maximum","value":%d}]`, nodePortLast)
	if err := c.Patch(ctx, crd, client.RawPatch(types.JSONPatchType, []byte(patch))); err != nil {
		return fmt.Errorf("widening the MyWeb node port range: %w", err)
	}
	probe := myWebs(1, 1)[0]
	probe.Spec.NodePortNumber = nodePortLast
	var err error
	for range 100 {
		if err = c.Create(ctx, probe.DeepCopy(), client.DryRunAll); err == nil {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("the API server does not take node port %d yet: %w", nodePortLast, err)
}

// adminConfig is the bench's own connection: no client-side limit, so its
// requests do not wait, and no gzip, which would cost the API server CPU
// that the contenders' runs are measured by.
func (e *env) adminConfig() *rest.Config {
	c := rest.CopyConfig(e.cluster.Config)
	c.QPS = -1
	c.DisableCompression = true
	return c
}

func (e *env) stop() error {
	var err error
	if e.cluster != nil {
		err = e.cluster.Stop()
	}
	if e.keep {
		fmt.Println("  kept", e.dir)
		return err
	}
	return errors.Join(err, os.RemoveAll(e.dir))
}

// controlPlaneCPU is the CPU time kube-apiserver and etcd have used so far,
// in seconds (0 when it cannot be read).
func (e *env) controlPlaneCPU() float64 {
	total := 0.0
	for name, pid := range e.cluster.PIDs() {
		if name == "kube-apiserver" || name == "etcd" {
			s, _ := cpuSeconds(pid)
			total += s
		}
	}
	return total
}

// profileAPIServer saves a CPU profile of kube-apiserver's next seconds as
// <out>/<name>.pb.gz.
func (e *env) profileAPIServer(ctx context.Context, out, name string, seconds int) error {
	hc, err := rest.HTTPClientFor(e.cluster.Config)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.cluster.Server+"/debug/pprof/profile?seconds="+strconv.Itoa(seconds), nil)
	if err != nil {
		return err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("kube-apiserver profile: %s", resp.Status)
	}
	return saveTo(filepath.Join(out, name+".pb.gz"), resp.Body)
}

func namespace(i int) string { return "bench-" + strconv.Itoa(i) }

// myWebs are the N custom resources both contenders converge: spread over
// the namespaces, each with its own node port.
func myWebs(n, namespaces int) []*operatorv1.MyWeb {
	webs := make([]*operatorv1.MyWeb, n)
	for i := range webs {
		webs[i] = &operatorv1.MyWeb{
			TypeMeta:   metav1.TypeMeta{APIVersion: operatorv1.GroupVersion.String(), Kind: "MyWeb"},
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("web-%04d", i), Namespace: namespace(i % namespaces)},
			Spec: operatorv1.MyWebSpec{
				Image:           "nginx:1.27",
				NodePortNumber:  int32(nodePortFirst + i),
				PageContentHtml: fmt.Sprintf("<h1>web %d</h1>", i),
			},
		}
	}
	return webs
}

// createAll creates objs with 16 requests in flight.
func createAll[T client.Object](ctx context.Context, c client.Client, objs []T) error {
	return inParallel(objs, func(o T) error { return c.Create(ctx, o) })
}

// inParallel calls do for every object, 16 at a time.
func inParallel[T any](objs []T, do func(T) error) error {
	jobs := make(chan T)
	var mu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for o := range jobs {
				if err := do(o); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}
		})
	}
	for _, o := range objs {
		jobs <- o
	}
	close(jobs)
	wg.Wait()
	return errors.Join(errs...)
}

// countOwned checks that every MyWeb has its three objects.
func countOwned(ctx context.Context, c client.Client, n int) error {
	lists := []client.ObjectList{&corev1.ConfigMapList{}, &corev1.ServiceList{}, &appsv1.DeploymentList{}}
	for _, l := range lists {
		if err := c.List(ctx, l, client.MatchingLabels{v1alpha1.LabelManagedBy: v1alpha1.ManagedByStencil}); err != nil {
			return err
		}
		if got := meta.LenList(l); got != n {
			return fmt.Errorf("%T: %d objects, want %d", l, got, n)
		}
	}
	return nil
}

func freePort() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	return port, l.Close()
}

func command(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	return cmd
}

// contenderProgram is command for a contender's program (see contenderCommand).
func contenderProgram(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := contenderCommand(ctx, name, args...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	return cmd
}
