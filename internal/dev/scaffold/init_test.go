package scaffold

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"

	"github.com/stencil-operator/stencil/internal/dev/localcluster"
)

// TestInitProjectRunsAndPasses follows docs/getting-started.md's five
// commands, as a new user does, outside this repository: `stencil init` in
// an empty temporary folder (its go.mod pointed at this checkout with a
// replace, and bin/stencil for the go-installed one), `make kind` (stencil
// create kind, make generate manifests, the test's expected output), the
// project's own `make test`, then `make run`, which must bring the sample
// Ready on a local control plane. The project holds none of stencil's
// sample kinds, and its ClusterRole names only its own kind's types.
func TestInitProjectRunsAndPasses(t *testing.T) {
	guide := guideCommands(t)
	checkout, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	bin, err := localcluster.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	stencil := filepath.Join(bin, "stencil") // make test builds it first
	dir := filepath.Join(t.TempDir(), guide.folder)
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	env := projectEnv()

	step(t, dir, env, stencil, append(guide.init, "--stencil-checkout", checkout)...)
	step(t, dir, env, "make", guide.kind...)
	checkPluralChange(t, dir, env)
	out := step(t, dir, env, "make", "test")
	for _, want := range []string{"every object valid", "ok  \texample.com/widgets"} {
		if !strings.Contains(out, want) {
			t.Errorf("the project's make test printed no %q:\n%s", want, out)
		}
	}
	checkHoldsNoSample(t, dir)
	checkClusterRole(t, dir)
	checkMakeRun(t, dir, env, nil)
	checkLinksNoSample(t, filepath.Join(dir, "bin", "widgets"), stencil)
	checkEvolveAPI(t, dir, env)
}

// samplePackages are the packages of stencil's sample kinds.
var samplePackages = regexp.MustCompile(`github\.com/stencil-operator/stencil/(templates|internal/testing/samples|api/(cache|operator|samplecontroller|flights|webapp|stacks)/)`)

// checkLinksNoSample: the project's binary (make run built it) holds no
// symbol of stencil's sample kinds, which stencil's own binary does hold;
// it logs both binaries' sizes.
func checkLinksNoSample(t *testing.T, project, stencil string) {
	t.Helper()
	linked := func(bin string) (samples []string, size int64) {
		info, err := os.Stat(bin)
		if err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command("go", "tool", "nm", bin).Output()
		if err != nil {
			t.Fatalf("go tool nm %s: %v", bin, err)
		}
		for line := range strings.Lines(string(out)) {
			if samplePackages.MatchString(line) {
				samples = append(samples, strings.TrimSpace(line))
			}
		}
		return samples, info.Size()
	}
	got, size := linked(project)
	if len(got) > 0 {
		t.Errorf("the project's binary links %d symbols of stencil's samples, e.g. %s", len(got), got[0])
	}
	own, ownSize := linked(stencil)
	if len(own) == 0 {
		t.Errorf("stencil's own binary links no symbol of its samples: the check finds nothing")
	}
	t.Logf("binary sizes: the project's %.1f MiB, stencil's %.1f MiB (%d symbols of the samples)", float64(size)/(1<<20), float64(ownSize)/(1<<20), len(own))
}

// guide is what docs/getting-started.md's "In five commands" runs.
type guide struct {
	folder string   // mkdir <folder> && cd <folder>
	init   []string // stencil's arguments
	kind   []string // make's arguments
}

// guideCommands reads the guide's commands, and fails unless they are the
// five this test runs, in order.
func guideCommands(t *testing.T) guide {
	t.Helper()
	data, err := os.ReadFile("../../../docs/getting-started.md")
	if err != nil {
		t.Fatal(err)
	}
	_, block, ok := strings.Cut(string(data), "## In five commands\n\n```sh\n")
	if !ok {
		t.Fatal("docs/getting-started.md has no \"In five commands\" shell block")
	}
	block, _, _ = strings.Cut(block, "```")
	var g guide
	var order []string
	for line := range strings.Lines(block) {
		fields := strings.Fields(line)
		switch {
		case len(fields) == 0:
		case fields[0] == "go" && fields[1] == "install":
			order = append(order, "install") // bin/stencil, built from this checkout, stands for it
		case fields[0] == "mkdir" && len(fields) == 5 && fields[2] == "&&" && fields[3] == "cd" && fields[1] == fields[4]:
			g.folder = fields[1]
			order = append(order, "mkdir")
		case fields[0] == "stencil" && fields[1] == "init":
			g.init = fields[1:]
			order = append(order, "init")
		case fields[0] == "make" && len(fields) > 1:
			if fields[1] == "kind" {
				g.kind = fields[1:]
			}
			order = append(order, "make "+fields[1])
		default:
			t.Fatalf("docs/getting-started.md: a command this test does not run: %s", line)
		}
	}
	if want := []string{"install", "mkdir", "init", "make kind", "make test", "make run"}; !slices.Equal(order, want) {
		t.Fatalf("docs/getting-started.md runs %v; this test follows %v", order, want)
	}
	return g
}

// checkPluralChange changes the scaffolded kind's plural (its resource
// marker's path) and runs make manifests again: the CRD file of the old
// plural and its kustomization entry are gone, and the kustomization lists
// exactly the CRD files there are. The rest of the test runs with the new
// plural.
func checkPluralChange(t *testing.T, dir string, env []string) {
	t.Helper()
	const before, after = "config/crd/bases/widgets.example.com_widgets.yaml", "config/crd/bases/widgets.example.com_widgetz.yaml"
	if _, err := os.Stat(filepath.Join(dir, before)); err != nil {
		t.Fatalf("the scaffolded kind's CRD: %v", err)
	}
	types := filepath.Join(dir, "api", "widgets", "v1alpha1", "widget_types.go")
	src, err := os.ReadFile(types)
	if err != nil {
		t.Fatal(err)
	}
	const marker = "+kubebuilder:resource:path=widgets,categories={stencil}"
	if !strings.Contains(string(src), marker) {
		t.Fatalf("%s has no %s to change", types, marker)
	}
	src = []byte(strings.Replace(string(src), marker, "+kubebuilder:resource:path=widgetz,categories={stencil}", 1))
	if err := os.WriteFile(types, src, 0o644); err != nil {
		t.Fatal(err)
	}
	step(t, dir, env, "make", "manifests")
	if _, err := os.Stat(filepath.Join(dir, before)); err == nil {
		t.Errorf("%s is left behind", before)
	}
	files, err := filepath.Glob(filepath.Join(dir, "config/crd/bases/*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{filepath.Join(dir, after)}; !slices.Equal(files, want) {
		t.Errorf("config/crd/bases holds %v, want %v", files, want)
	}
	kustomization, err := os.ReadFile(filepath.Join(dir, "config/crd/kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var listed []string
	for line := range strings.SplitSeq(string(kustomization), "\n") {
		if entry, ok := strings.CutPrefix(line, "- "); ok {
			listed = append(listed, entry)
		}
	}
	if want := []string{"bases/widgets.example.com_widgetz.yaml"}; !slices.Equal(listed, want) {
		t.Errorf("config/crd/kustomization.yaml lists %v, want %v", listed, want)
	}
}

// projectEnv is the environment of the project's commands: the tools'
// cache is shared (the project builds nothing stencil built), but nothing
// of this repository's make leaks in. -trimpath lets the Go build cache
// serve stencil's packages whatever folder the checkout is in (a CI
// clone's).
func projectEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if slices.Contains([]string{localcluster.BinDirEnv, "MAKEFLAGS", "MAKELEVEL", "MFLAGS", "GOFLAGS"}, name) {
			continue
		}
		env = append(env, kv)
	}
	return append(env, "GOFLAGS=-trimpath")
}

// step runs a command in dir and returns its output, failing the test
// with it when the command fails.
func step(t *testing.T, dir string, env []string, name string, args ...string) string {
	t.Helper()
	start := time.Now()
	cmd := exec.CommandContext(t.Context(), name, args...)
	cmd.Dir, cmd.Env = dir, env
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	t.Logf("%s %s: %s", filepath.Base(name), strings.Join(args, " "), time.Since(start).Round(time.Second))
	return string(out)
}

// stencil's sample kinds and decorators, none of which a new project has.
var samples = []string{"memcached", "myweb", "foo", "flightticket", "guestbook", "appstack", "replicaset-podcount", "namespace-defaults"}

func checkHoldsNoSample(t *testing.T, dir string) {
	t.Helper()
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "bin" || d.Name() == "hack") {
			return filepath.SkipDir
		}
		base := strings.TrimSuffix(d.Name(), filepath.Ext(d.Name()))
		for _, s := range samples {
			if base == s || strings.Contains(base, "_"+s) {
				t.Errorf("the project holds %s, of stencil's sample %s", path, s)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// checkClusterRole: the project's ClusterRole grants its kind (by the
// resource name its CRD declares), its CRD (read at start-up) and the
// types its kind owns (ConfigMaps), and none of what stencil's samples
// need (Secrets, Jobs, StatefulSets, Deployments, their kinds).
func checkClusterRole(t *testing.T, dir string) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "config", "rbac", "role.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	role := rbacv1.ClusterRole{}
	if err := yaml.Unmarshal(data, &role); err != nil {
		t.Fatal(err)
	}
	if role.Name != "widgets-manager" {
		t.Errorf("the ClusterRole is %s, want widgets-manager", role.Name)
	}
	var granted []string
	for _, r := range role.Rules {
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				if len(r.ResourceNames) > 0 {
					res += "=" + strings.Join(r.ResourceNames, ",")
				}
				granted = append(granted, g+"/"+res)
			}
		}
	}
	want := []string{"/configmaps", "/events", "events.k8s.io/events", "stencil.dev/controlkeys", "widgets.example.com/widgetz", "widgets.example.com/widgetz/status", "widgets.example.com/widgetz/finalizers",
		"apiextensions.k8s.io/customresourcedefinitions=widgetz.widgets.example.com"}
	slices.Sort(granted)
	slices.Sort(want)
	if !slices.Equal(granted, want) {
		t.Errorf("the ClusterRole grants %v, want exactly %v", granted, want)
	}
}

// checkMakeRun runs the project's make run until its sample is Ready, runs
// whileReady (when not nil) with a kubectl of its control plane, then stops
// it as a developer does, with Ctrl-C.
func checkMakeRun(t *testing.T, dir string, env []string, whileReady func(kubectl func(args ...string) (string, error))) {
	t.Helper()
	var out bytes.Buffer
	// Its operator's endpoints off: other tests run beside this one.
	cmd := exec.Command("make", "run", "RUN_ARGS=-- --metrics-bind-address=0 --health-probe-bind-address=0")
	cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr = dir, env, &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var waitErr error
	exited := make(chan struct{})
	go func() { waitErr = cmd.Wait(); close(exited) }()
	stop := sync.OnceFunc(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGINT)
		select {
		case <-exited:
		case <-time.After(time.Minute):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-exited
		}
	})
	defer stop()
	kubectl := filepath.Join(dir, "bin", "kubectl")
	kubeconfig := filepath.Join(dir, "bin", "local.kubeconfig")
	start := time.Now()
	deadline := start.Add(4 * time.Minute)
	for {
		select {
		case <-exited:
			t.Fatalf("make run exited: %v\n%s", waitErr, out.String())
		default:
		}
		ready, err := readyOf(kubectl, kubeconfig)
		if ready == "True" {
			t.Logf("make run: the sample Widget is Ready after %s", time.Since(start).Round(time.Second))
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("make run: the sample Widget is not Ready after %s (%q, %v)\n%s", time.Since(start).Round(time.Second), ready, err, out.String())
		}
		time.Sleep(time.Second)
	}
	if whileReady != nil {
		whileReady(func(args ...string) (string, error) {
			out, err := exec.Command(kubectl, append([]string{"--kubeconfig", kubeconfig}, args...)...).CombinedOutput()
			return string(out), err
		})
	}
	stop()
	if !strings.Contains(out.String(), "Stopping the local control plane") {
		t.Errorf("make run did not stop its local control plane on Ctrl-C:\n%s", out.String())
	}
}

// readyOf is the sample Widget's Ready status, through the kubeconfig
// that make run writes once its control plane is up.
func readyOf(kubectl, kubeconfig string) (string, error) {
	if _, err := os.Stat(kubeconfig); errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	cmd := exec.Command(kubectl, "--kubeconfig", kubeconfig, "get", "widget", "example-widget", "-n", "default", "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`)
	got, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("kubectl get: %w", err)
	}
	return strings.TrimSpace(string(got)), nil
}
