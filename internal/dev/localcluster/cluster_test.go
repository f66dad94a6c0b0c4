package localcluster

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

var cluster *Cluster

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		runChild()
		return
	}
	os.Exit(RunTests(m, Options{}, &cluster))
}

func TestCreateAndReadObject(t *testing.T) {
	clients, err := kubernetes.NewForConfig(cluster.Config)
	if err != nil {
		t.Fatal(err)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "smoke-"}}
	ns, err = clients.CoreV1().Namespaces().Create(t.Context(), ns, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating namespace: %v", err)
	}
	want := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "smoke", Namespace: ns.Name},
		Data:       map[string]string{"hello": "world"},
	}
	if _, err := clients.CoreV1().ConfigMaps(ns.Name).Create(t.Context(), want, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating ConfigMap: %v", err)
	}
	got, err := clients.CoreV1().ConfigMaps(ns.Name).Get(t.Context(), "smoke", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("reading ConfigMap: %v", err)
	}
	if got.Data["hello"] != "world" {
		t.Errorf("ConfigMap data = %v, want hello=world", got.Data)
	}
}

func TestUserConfigIsBoundByRBAC(t *testing.T) {
	cfg, err := cluster.UserConfig("nobody")
	if err != nil {
		t.Fatal(err)
	}
	clients, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	_, err = clients.CoreV1().Secrets("default").List(t.Context(), metav1.ListOptions{})
	if err == nil {
		t.Fatal("a user without RBAC bindings listed Secrets; want Forbidden")
	}
}

func TestNodesAreReady(t *testing.T) {
	clients, err := kubernetes.NewForConfig(cluster.Config)
	if err != nil {
		t.Fatal(err)
	}
	nodes, err := clients.CoreV1().Nodes().List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes.Items) == 0 {
		t.Fatal("no nodes")
	}
	for i := range nodes.Items {
		if err := nodeReady(&nodes.Items[i]); err != nil {
			t.Error(err)
		}
	}
}

// childEnv makes the test binary start a cluster, print its PIDs and then
// die the way the mode says, standing in for a test run that fails or is
// interrupted.
const childEnv = "LOCALCLUSTER_CHILD"

func runChild() {
	c, err := Start(context.Background(), Options{})
	if err != nil {
		panic(err)
	}
	_ = json.NewEncoder(os.Stdout).Encode(c.PIDs())
	switch os.Getenv(childEnv) {
	case "panic":
		time.Sleep(200 * time.Millisecond)
		panic("a test failed hard")
	default: // "wait": killed from outside.
		select {}
	}
}

// TestNoProcessOutlivesItsProgram kills or crashes a program that runs a
// cluster, without Stop, and checks that every component dies with it.
func TestNoProcessOutlivesItsProgram(t *testing.T) {
	for _, mode := range []string{"panic", "sigkill", "sigint"} {
		t.Run(mode, func(t *testing.T) {
			env := "wait"
			if mode == "panic" {
				env = "panic"
			}
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), childEnv+"="+env)
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			var pids map[string]int
			line, err := bufio.NewReader(stdout).ReadBytes('\n')
			if err != nil || json.Unmarshal(line, &pids) != nil {
				_ = cmd.Process.Kill()
				t.Fatalf("child did not report its cluster: %v %q", err, line)
			}
			switch mode {
			case "sigkill":
				_ = cmd.Process.Signal(syscall.SIGKILL)
			case "sigint":
				_ = cmd.Process.Signal(syscall.SIGINT)
			}
			_ = cmd.Wait()
			for name, pid := range pids {
				if err := waitGone(pid, 10*time.Second); err != nil {
					_ = syscall.Kill(pid, syscall.SIGKILL)
					t.Errorf("%s (pid %d) outlived its program: %v", name, pid, err)
				}
			}
			if len(pids) < 5 {
				t.Errorf("child reported %d components, want etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok: %v", len(pids), pids)
			}
		})
	}
}

func waitGone(pid int, within time.Duration) error {
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		// Signal 0 checks existence; a zombie would still answer, but our
		// children are reaped by init once their parent is gone.
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return errors.New("still running")
}
