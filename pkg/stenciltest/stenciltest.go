// Package stenciltest is what a stencil project's Go tests need: a local
// control plane (kube-apiserver, etcd, the controllers and fake kwok nodes,
// from the binaries `make tools` puts in bin/) and a smoke test that brings
// every sample of config/samples to Ready with the project's own operator,
// and the template tests as `stencil test` runs them:
//
//	func TestTemplates(t *testing.T) {
//		stenciltest.TemplateTestsPass(t, project, stenciltest.Options{})
//	}
//
//	func TestSamplesBecomeReady(t *testing.T) {
//		stenciltest.SamplesBecomeReady(t, project, stenciltest.Options{})
//	}
//
// The binaries are found in $STENCIL_BIN_DIR, else in bin/ at the root of
// the module that holds the working directory.
package stenciltest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/stencil-operator/stencil/internal/dev/localcluster"
	"github.com/stencil-operator/stencil/pkg/stencil"
)

// Options say where a project is and how the stencil command a function
// runs is run. Every function that takes Options reads every field. The
// zero value is usable.
type Options struct {
	// Root is the project's root folder, holding templates/ and config/;
	// default ".".
	Root string
	// Timeout bounds the wait for one outcome: each sample to be Ready
	// (SamplesBecomeReady; default two minutes), the template tests as a
	// whole (TemplateTestsPass; default none but go test's own).
	Timeout time.Duration
	// Args are more flags of the command the function runs: the
	// operator's (SamplesBecomeReady), such as --decorators; stencil
	// test's (TemplateTestsPass), such as --render-timeout.
	Args []string
}

// Cluster is a running local control plane.
type Cluster struct {
	// Config is a cluster-admin client configuration.
	Config *rest.Config
	// Kubeconfig is the path of a cluster-admin kubeconfig file.
	Kubeconfig string
}

// StartCluster starts a local control plane for the test and stops it when
// the test ends.
func StartCluster(t testing.TB) *Cluster {
	t.Helper()
	c, err := localcluster.Start(context.Background(), localcluster.Options{})
	if err != nil {
		t.Fatalf("starting the local control plane (are the binaries built? make tools): %v", err)
	}
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Errorf("stopping the local control plane: %v", err)
		}
	})
	return &Cluster{Config: c.Config, Kubeconfig: c.Kubeconfig}
}

// InstallCRDs creates the CRDs of every *.yaml file in dirs (missing
// folders are skipped) and waits until the API server serves each.
func (c *Cluster) InstallCRDs(t testing.TB, dirs ...string) {
	t.Helper()
	cl := c.client(t)
	for _, dir := range dirs {
		files, _ := filepath.Glob(filepath.Join(dir, "*.yaml"))
		for _, f := range files {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			crd := &apiextensionsv1.CustomResourceDefinition{}
			if err := yaml.Unmarshal(data, crd); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if crd.Kind != "CustomResourceDefinition" {
				continue
			}
			if err := cl.Create(context.Background(), crd); err != nil && !apierrors.IsAlreadyExists(err) {
				t.Fatalf("creating the CRD %s: %v", crd.Name, err)
			}
			c.waitServed(t, cl, crd)
		}
	}
}

// waitServed waits until the API server's discovery serves crd's kind.
func (c *Cluster) waitServed(t testing.TB, cl client.Client, crd *apiextensionsv1.CustomResourceDefinition) {
	t.Helper()
	gk := crd.Spec.Names.Kind + "." + crd.Spec.Group
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		_, err := cl.RESTMapper().RESTMapping(schema.GroupKind{Group: crd.Spec.Group, Kind: crd.Spec.Names.Kind})
		return err == nil, nil
	})
	if err != nil {
		t.Fatalf("the API server does not serve %s: %v", gk, err)
	}
}

// RunOperator runs the project's operator in this process against the
// cluster until the test ends, with the flags args (metrics and probes are
// off unless args set them). A kind with several versions gets its
// conversion webhook on a free local port (--webhook-url), as `make run`
// does: the API server calls it. It changes nothing of the process (see
// Project.Run): tests may run operators in parallel, of one project or
// several, on one cluster or several.
func (c *Cluster) RunOperator(t testing.TB, p stencil.Project, args ...string) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	webhook := "--webhook-url=https://" + l.Addr().String() + "/convert"
	_ = l.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- p.Run(ctx, append([]string{"--kubeconfig=" + c.Kubeconfig, "--metrics-bind-address=0", "--health-probe-bind-address=0", webhook}, args...), nil)
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("the operator: %v", err)
		}
	})
}

// TemplateTestsPass runs the template tests of every kind and decorator of
// p (templates/<kind>/tests/<case>/, read from o.Root's templates/ folder),
// as `stencil test` does: each case's input, defaulted from its kind's CRD
// (config/crd/bases, config/crd/external), renders to its expected.yaml,
// and every object is valid for its type. It fails the test with the
// failed cases.
func TemplateTestsPass(t testing.TB, p stencil.Project, o Options) {
	t.Helper()
	root := o.Root
	if root == "" {
		root = "."
	}
	var out strings.Builder
	args := []string{"test", "--templates", filepath.Join(root, "templates")}
	if crds := crdFolders(root); crds != "" {
		args = append(args, "--crds", crds)
	}
	done := make(chan error, 1)
	go func() { done <- p.Run(t.Context(), append(args, o.Args...), &out) }()
	var timeout <-chan time.Time
	if o.Timeout > 0 {
		timeout = time.After(o.Timeout)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("template tests: %v\n%s", err, out.String())
		}
	case <-timeout:
		t.Fatalf("the template tests did not finish within %s", o.Timeout)
	}
	t.Log(strings.TrimSpace(out.String()))
}

// crdFolders are the project's folders of CRDs that exist, for --crds.
func crdFolders(root string) string {
	var dirs []string
	for _, d := range []string{filepath.Join(root, "config", "crd", "bases"), filepath.Join(root, "config", "crd", "external")} {
		if info, err := os.Stat(d); err == nil && info.IsDir() {
			dirs = append(dirs, d)
		}
	}
	return strings.Join(dirs, ",")
}

// SamplesBecomeReady starts a local control plane, installs the CRDs of
// config/crd/bases and config/crd/external, runs the project's operator,
// applies every resource of config/samples/*.yaml and waits until each is
// Ready, failing with its conditions when one is not in time.
func SamplesBecomeReady(t testing.TB, p stencil.Project, o Options) {
	t.Helper()
	root := o.Root
	if root == "" {
		root = "."
	}
	timeout := o.Timeout
	if timeout == 0 {
		timeout = 2 * time.Minute
	}
	samples, err := readSamples(filepath.Join(root, "config", "samples"))
	if err != nil {
		t.Fatal(err)
	}
	if len(samples) == 0 {
		t.Log("config/samples holds no resource: nothing to bring Ready (make kind adds a kind and its sample)")
		return
	}
	c := StartCluster(t)
	c.InstallCRDs(t, filepath.Join(root, "config", "crd", "bases"), filepath.Join(root, "config", "crd", "external"))
	c.RunOperator(t, p, o.Args...)
	cl := c.client(t)
	ctx := context.Background()
	for _, s := range samples {
		if s.GetNamespace() == "" {
			s.SetNamespace("default")
		}
		if err := cl.Apply(ctx, client.ApplyConfigurationFromUnstructured(s), client.FieldOwner("stenciltest"), client.ForceOwnership); err != nil {
			t.Fatalf("applying the sample %s %s: %v", s.GetKind(), s.GetName(), err)
		}
	}
	for _, s := range samples {
		waitReady(t, cl, s, timeout)
	}
}

// waitReady waits until the resource like s has a Ready condition True.
func waitReady(t testing.TB, cl client.Client, s *unstructured.Unstructured, timeout time.Duration) {
	t.Helper()
	got := &unstructured.Unstructured{}
	got.SetGroupVersionKind(s.GroupVersionKind())
	start := time.Now()
	var readErr error
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		if err := cl.Get(ctx, client.ObjectKeyFromObject(s), got); err != nil {
			// A read that fails (the API server busy, say) does not end the
			// wait: it is tried again until the timeout, whose failure
			// names the last such error.
			readErr = fmt.Errorf("its last read failed: %w", err)
			return false, nil
		}
		readErr = nil
		return readyStatus(got) == metav1.ConditionTrue, nil
	})
	if err != nil {
		conditions, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
		out, _ := yaml.Marshal(conditions)
		var reading string
		if readErr != nil {
			reading = " (" + readErr.Error() + ")"
		}
		t.Fatalf("%s %s/%s is not Ready after %s%s; its conditions:\n%s", s.GetKind(), s.GetNamespace(), s.GetName(), timeout, reading, out)
	}
	t.Logf("%s %s/%s is Ready after %s", s.GetKind(), s.GetNamespace(), s.GetName(), time.Since(start).Round(time.Millisecond))
}

// readyStatus is the status of o's Ready condition.
func readyStatus(o *unstructured.Unstructured) metav1.ConditionStatus {
	raw, _, _ := unstructured.NestedSlice(o.Object, "status", "conditions")
	var conditions []metav1.Condition
	for _, c := range raw {
		var cond metav1.Condition
		if m, ok := c.(map[string]any); ok && runtime.DefaultUnstructuredConverter.FromUnstructured(m, &cond) == nil {
			conditions = append(conditions, cond)
		}
	}
	if c := meta.FindStatusCondition(conditions, "Ready"); c != nil {
		return c.Status
	}
	return metav1.ConditionUnknown
}

// readSamples reads every object of the *.yaml files in dir.
func readSamples(dir string) ([]*unstructured.Unstructured, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return nil, err
	}
	slices.Sort(files)
	var out []*unstructured.Unstructured
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(string(data)), 4096)
		for {
			o := &unstructured.Unstructured{}
			if err := dec.Decode(&o.Object); err != nil {
				if errors.Is(err, io.EOF) {
					break
				}
				return nil, fmt.Errorf("%s: %w", f, err)
			}
			if len(o.Object) > 0 {
				out = append(out, o)
			}
		}
	}
	return out, nil
}

func (c *Cluster) client(t testing.TB) client.Client {
	t.Helper()
	sch := runtime.NewScheme()
	if err := errors.Join(clientgoscheme.AddToScheme(sch), apiextensionsv1.AddToScheme(sch)); err != nil {
		t.Fatal(err)
	}
	cl, err := client.New(c.Config, client.Options{Scheme: sch})
	if err != nil {
		t.Fatal(err)
	}
	return cl
}
