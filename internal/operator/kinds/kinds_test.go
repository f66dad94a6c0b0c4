package kinds_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	cachev1 "github.com/stencil-operator/stencil/api/cache/v1"
	flightsv1 "github.com/stencil-operator/stencil/api/flights/v1"
	operatorv1 "github.com/stencil-operator/stencil/api/operator/v1"
	samplecontrollerv1alpha1 "github.com/stencil-operator/stencil/api/samplecontroller/v1alpha1"
	"github.com/stencil-operator/stencil/api/v1alpha1"
	webappv1 "github.com/stencil-operator/stencil/api/webapp/v1"
	"github.com/stencil-operator/stencil/internal/dev/localcluster"
	"github.com/stencil-operator/stencil/internal/testing/samples"
	"github.com/stencil-operator/stencil/internal/testing/testutil"
	"github.com/stencil-operator/stencil/internal/testing/testutil/testop"
)

var (
	cluster *localcluster.Cluster
	k8s     client.Client
	binDir  string
)

func TestMain(m *testing.M) {
	os.Exit(localcluster.RunTests(operatorM{m}, localcluster.Options{}, &cluster))
}

type operatorM struct{ m *testing.M }

func (o operatorM) Run() int {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := start(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "starting the operator:", err)
		return 1
	}
	return o.m.Run()
}

func start(ctx context.Context) error {
	var err error
	if binDir, err = localcluster.BinDir(); err != nil {
		return err
	}
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, apiextensionsv1.AddToScheme, samples.AddToScheme} {
		if err := add(scheme); err != nil {
			return err
		}
	}
	if k8s, err = client.New(cluster.Config, client.Options{Scheme: scheme}); err != nil {
		return err
	}
	if err := testutil.InstallCRDs(ctx, k8s, os.DirFS("../../../config/crd/bases")); err != nil {
		return err
	}
	loaded, err := samples.Load()
	if err != nil {
		return err
	}
	decorators, err := samples.LoadDecorators()
	if err != nil {
		return err
	}
	// The operator runs as a user bound only to the generated ClusterRole, so
	// every test here also proves that the RBAC is enough.
	operator, err := operatorConfig(ctx)
	if err != nil {
		return err
	}
	return testop.StartWithDecorators(ctx, operator, scheme, loaded, decorators, nil)
}

// operatorConfig binds a new user to config/rbac/role.yaml and returns its
// client configuration.
func operatorConfig(ctx context.Context) (*rest.Config, error) {
	data, err := os.ReadFile("../../../config/rbac/role.yaml")
	if err != nil {
		return nil, err
	}
	role := &rbacv1.ClusterRole{}
	if err := yaml.Unmarshal(data, role); err != nil {
		return nil, err
	}
	const user = "stencil-operator"
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "stencil-manager"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
	}
	if err := errors.Join(k8s.Create(ctx, role), k8s.Create(ctx, binding)); err != nil {
		return nil, err
	}
	return cluster.UserConfig(user)
}

// kubectl runs bin/kubectl as cluster admin with stdin, returning its
// combined output.
func kubectl(t *testing.T, stdin string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(binDir, "kubectl"), args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+cluster.Kubeconfig)
	cmd.Stdin = strings.NewReader(stdin)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

func ready(obj v1alpha1.Object) error {
	c := meta.FindStatusCondition(obj.StencilStatus().Conditions, v1alpha1.ConditionReady)
	if c == nil || c.Status != metav1.ConditionTrue || obj.StencilStatus().ObservedGeneration != obj.GetGeneration() {
		return fmt.Errorf("%s not Ready: %+v", obj.GetName(), c)
	}
	return nil
}

func getObj[T client.Object](t *testing.T, obj T, name string) (T, error) {
	t.Helper()
	return obj, k8s.Get(t.Context(), client.ObjectKey{Namespace: "default", Name: name}, obj)
}

// TestSeedSamplesConverge applies the seeds' custom resources unchanged, as
// a user would, and checks what each operator of the seeds promised.
func TestSeedSamplesConverge(t *testing.T) {
	if out, err := kubectl(t, "", "apply", "-f", "../../../config/samples/"); err != nil {
		t.Fatalf("kubectl apply of the seed samples: %v\n%s", err, out)
	}
	within := 60 * time.Second

	testutil.Eventually(t, within, "Memcached: 3 Running pods listed in status.nodes", func() error {
		mc, err := getObj(t, &cachev1.Memcached{}, "example-memcached")
		if err != nil {
			return err
		}
		pods := &corev1.PodList{}
		if err := k8s.List(t.Context(), pods, client.InNamespace("default"), client.MatchingLabels{"app.kubernetes.io/name": "memcached"}); err != nil {
			return err
		}
		var running []string
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
				running = append(running, p.Name)
			}
		}
		slices.Sort(running)
		if len(running) != 3 || !slices.Equal(running, mc.Status.Nodes) {
			return fmt.Errorf("running pods %v, status.nodes %v", running, mc.Status.Nodes)
		}
		return ready(mc)
	})
	testutil.Eventually(t, within, "MyWeb: node port 30100, the HTML, completed", func() error {
		web, err := getObj(t, &operatorv1.MyWeb{}, "myweb")
		if err != nil {
			return err
		}
		svc, err := getObj(t, &corev1.Service{}, "myweb")
		if err != nil {
			return err
		}
		if svc.Spec.Type != corev1.ServiceTypeNodePort || svc.Spec.Ports[0].NodePort != 30100 {
			return fmt.Errorf("service %s port %+v", svc.Spec.Type, svc.Spec.Ports)
		}
		cm, err := getObj(t, &corev1.ConfigMap{}, "myweb-html")
		if err != nil {
			return err
		}
		if !strings.Contains(cm.Data["index.html"], "<h1>Hello, World!</h1>") {
			return fmt.Errorf("index.html = %q", cm.Data["index.html"])
		}
		if !web.Status.Completed {
			return fmt.Errorf("status.completed is false")
		}
		return ready(web)
	})
	testutil.Eventually(t, within, "Foo: Deployment example-foo, availableReplicas = replicas", func() error {
		foo, err := getObj(t, &samplecontrollerv1alpha1.Foo{}, "example-foo")
		if err != nil {
			return err
		}
		d, err := getObj(t, &appsv1.Deployment{}, "example-foo")
		if err != nil {
			return err
		}
		if *d.Spec.Replicas != foo.Spec.Replicas || foo.Status.AvailableReplicas != foo.Spec.Replicas {
			return fmt.Errorf("deployment replicas %d, status.availableReplicas %d, spec.replicas %d", *d.Spec.Replicas, foo.Status.AvailableReplicas, foo.Spec.Replicas)
		}
		return ready(foo)
	})
	testutil.Eventually(t, within, "FlightTicket: booking ConfigMap", func() error {
		ft, err := getObj(t, &flightsv1.FlightTicket{}, "my-flight-ticket")
		if err != nil {
			return err
		}
		cm, err := getObj(t, &corev1.ConfigMap{}, "my-flight-ticket-booking")
		if err != nil {
			return err
		}
		if cm.Data["from"] != "Mumbai" || cm.Data["to"] != "London" || cm.Data["number"] != "2" || ft.Status.Booking != cm.Name {
			return fmt.Errorf("booking %v, status.booking %q", cm.Data, ft.Status.Booking)
		}
		return ready(ft)
	})
	testutil.Eventually(t, within, "Guestbook: ConfigMap and ready replicas", func() error {
		gb, err := getObj(t, &webappv1.Guestbook{}, "guestbook-sample")
		if err != nil {
			return err
		}
		cm, err := getObj(t, &corev1.ConfigMap{}, "guestbook-cfg")
		if err != nil {
			return err
		}
		if cm.Data["alias"] != "Phone" || gb.Status.ReadyReplicas != 2 {
			return fmt.Errorf("alias %q, status.readyReplicas %d", cm.Data["alias"], gb.Status.ReadyReplicas)
		}
		return ready(gb)
	})

	out, err := kubectl(t, "", "get", "memcached,myweb,foo,flighttickets,guestbooks")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("kubectl get memcached,myweb,foo,flighttickets,guestbooks:\n%s", out)
	headers := 0
	for line := range strings.SplitSeq(out, "\n") {
		if cols := strings.Fields(line); len(cols) > 0 && cols[0] == "NAME" {
			headers++
			if !slices.Contains(cols, "READY") || !slices.Contains(cols, "DRIFTED") || !slices.Contains(cols, "AGE") {
				t.Errorf("header %q lacks READY, DRIFTED or AGE", line)
			}
		}
	}
	if headers != 5 {
		t.Errorf("want a table for each of the 5 kinds:\n%s", out)
	}
	if strings.Count(out, "True") < 5 {
		t.Errorf("want every resource Ready:\n%s", out)
	}
}

// TestFullSamplesConverge applies the samples that show every field.
func TestFullSamplesConverge(t *testing.T) {
	if out, err := kubectl(t, "", "apply", "-n", "default", "-f", "../../../config/samples/full/"); err != nil {
		t.Fatalf("kubectl apply of the full samples: %v\n%s", err, out)
	}
	objs := []v1alpha1.Object{&cachev1.Memcached{}, &operatorv1.MyWeb{}, &samplecontrollerv1alpha1.Foo{}, &flightsv1.FlightTicket{}, &webappv1.Guestbook{}}
	names := []string{"memcached-full", "myweb-full", "foo-full", "ticket-full", "guestbook-full"}
	for i, obj := range objs {
		testutil.Eventually(t, 60*time.Second, names[i]+" Ready", func() error {
			if err := k8s.Get(t.Context(), client.ObjectKey{Namespace: "default", Name: names[i]}, obj); err != nil {
				return err
			}
			return ready(obj)
		})
	}
}
