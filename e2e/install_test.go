//go:build e2e

package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestInstallManifest builds the install manifest as a release would
// (`make build-installer IMG=…`), applies it with kubectl, and checks that
// it creates what it should: the CRDs (established), and the operator's
// Deployment with the image given, which becomes available (its pods run on
// kwok's nodes: the image is never pulled). (The suite created the
// namespace and applied config/rbac before, for its own operator: the RBAC
// checks below only show the manifest does not break them.) kubectl diff
// then shows nothing to change.
func TestInstallManifest(t *testing.T) {
	const image = "example.com/stencil:v0.0.0-e2e"
	manifest := filepath.Join(t.TempDir(), "install.yaml")
	build := exec.Command("make", "-C", "..", "build-installer", "IMG="+image, "INSTALLER="+manifest)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("make build-installer: %v\n%s", err, out)
	}
	data, err := os.ReadFile(manifest)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(data), "stencil:latest") {
		t.Errorf("the manifest still names the image stencil:latest")
	}
	asInstalled(t)
	mustKubectl(t, "apply", "--server-side", "-f", manifest)
	t.Cleanup(func() { // the suite's own operator runs out of cluster, in the same namespace
		_, _ = kubectl(t, "-n", "stencil-system", "delete", "deployment/stencil", "service/stencil-metrics", "service/stencil-webhook", "--ignore-not-found")
		// The admission policies too: the other tests install them when they need them.
		_, _ = kubectl(t, "delete", "validatingadmissionpolicybinding/stencil-control-keys", "validatingadmissionpolicy/stencil-control-keys",
			"validatingadmissionpolicybinding/stencil-graph-deletion", "validatingadmissionpolicy/stencil-graph-deletion", "--ignore-not-found")
	})
	for _, crd := range []string{"memcacheds.cache.example.com", "mywebs.operator.k8s-summit.org", "foos.samplecontroller.k8s.io", "flighttickets.flights.com", "guestbooks.webapp.my.domain"} {
		mustKubectl(t, "wait", "--for=condition=Established", "crd/"+crd, "--timeout=30s")
	}
	for _, obj := range [][]string{
		{"clusterrole", "stencil-manager"},
		{"clusterrolebinding", "stencil-manager"},
		{"-n", "stencil-system", "serviceaccount", "stencil"},
		{"-n", "stencil-system", "service", "stencil-metrics"},
		{"-n", "stencil-system", "service", "stencil-webhook"},
		{"validatingadmissionpolicy", "stencil-control-keys"},
		{"validatingadmissionpolicybinding", "stencil-control-keys"},
		{"validatingadmissionpolicy", "stencil-graph-deletion"},
		{"validatingadmissionpolicybinding", "stencil-graph-deletion"},
	} {
		mustKubectl(t, append([]string{"get"}, obj...)...)
	}
	mustKubectl(t, "-n", "stencil-system", "wait", "--for=condition=Available", "deployment/stencil", "--timeout=60s")
	if got := mustKubectl(t, "-n", "stencil-system", "get", "deployment", "stencil", "-o", "jsonpath={.spec.template.spec.containers[0].image}"); got != image {
		t.Errorf("the Deployment runs %q, want %q", got, image)
	}
	if out, err := kubectl(t, "diff", "--server-side", "-f", manifest); err != nil || strings.TrimSpace(out) != "" {
		t.Errorf("kubectl diff after the apply: %v\n%s", err, out) // exit 1: differences
	}
}

// TestHelmChart installs the operator's chart (dist/chart, generated from the
// same kustomization) with the helm CLI, as release stencil-helm in its own
// namespace, and checks what it creates: the Deployment with the values
// given, available; cluster-scoped RBAC named after the release and bound
// to the release's ServiceAccount; the leader election Role. An upgrade
// that turns leader election and metrics off changes the args and removes
// the metrics Service and RBAC; uninstalling removes the rest and keeps the
// CRDs (Helm never deletes a chart's CRDs; the suite installed them first,
// so Helm skipped crds/ here).
func TestHelmChart(t *testing.T) {
	const release, ns, image = "stencil-helm", "stencil-helm", "example.com/stencil:v0.0.0-helm"
	helm := func(args ...string) {
		t.Helper()
		cmd := exec.Command(filepath.Join(binDir, "helm"), append(args, "--kubeconfig", cluster.Kubeconfig)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("helm %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	deployment := func() string {
		return mustKubectl(t, "-n", ns, "get", "deployment", "stencil", "-o",
			"jsonpath={.spec.replicas} {.spec.template.spec.containers[0].image} {.spec.template.spec.containers[0].args}")
	}
	helm("lint", "../dist/chart", "--set", "image="+image)
	asInstalled(t)
	helm("install", release, "../dist/chart", "--namespace", ns, "--create-namespace", "--set", "image="+image, "--wait", "--timeout", "2m")
	if got, want := deployment(), "2 "+image+` ["--leader-elect","--metrics-bind-address=:8443","--metrics-secure","--health-probe-bind-address=:8081","--rollout-batch=10","--rollout-deadline=10m","--webhook-service=stencil-helm/stencil-webhook"]`; got != want {
		t.Errorf("Deployment: %s, want %s", got, want)
	}
	for _, binding := range []string{"manager", "metrics-auth"} {
		if got := mustKubectl(t, "get", "clusterrolebinding", release+"-"+binding, "-o", "jsonpath={.roleRef.name} {.subjects[0].namespace}/{.subjects[0].name}"); got != release+"-"+binding+" "+ns+"/stencil" {
			t.Errorf("ClusterRoleBinding %s-%s: %s", release, binding, got)
		}
	}
	mustKubectl(t, "-n", ns, "get", "role,rolebinding", "stencil-leader-election")
	mustKubectl(t, "-n", ns, "get", "service", "stencil-metrics")

	helm("upgrade", release, "../dist/chart", "--namespace", ns, "--reuse-values",
		"--set", "replicas=1", "--set", "leaderElection=false", "--set", "metrics.enabled=false", "--set", "rollout.batch=3", "--wait", "--timeout", "2m")
	if got, want := deployment(), "1 "+image+` ["--metrics-bind-address=0","--health-probe-bind-address=:8081","--rollout-batch=3","--rollout-deadline=10m","--webhook-service=stencil-helm/stencil-webhook"]`; got != want {
		t.Errorf("Deployment after the upgrade: %s, want %s", got, want)
	}
	for _, gone := range [][]string{{"-n", ns, "service", "stencil-metrics"}, {"clusterrole", release + "-metrics-auth"}} {
		if out, err := kubectl(t, append([]string{"get"}, gone...)...); err == nil {
			t.Errorf("%v left with metrics off: %s", gone, out)
		}
	}

	helm("uninstall", release, "--namespace", ns, "--wait")
	if out, err := kubectl(t, "get", "clusterrole", release+"-manager"); err == nil {
		t.Errorf("ClusterRole %s-manager left after uninstall: %s", release, out)
	}
	mustKubectl(t, "get", "crd", "mywebs.operator.k8s-summit.org")
}

// asInstalled gives the Memcached CRD (the kind with several versions) the
// conversion webhook a cluster install writes, its Service, until the test
// ends: the suite's operators run out of cluster and point it at their
// URL, and a CRD may not name both.
func asInstalled(t *testing.T) {
	t.Helper()
	const converting = "memcacheds.cache.example.com"
	conv := mustKubectl(t, "get", "crd", converting, "-o", "jsonpath={.spec.conversion}")
	mustKubectl(t, "patch", "crd", converting, "--type=merge", "-p", `{"spec":{"conversion":{"webhook":{"clientConfig":{"url":null,"caBundle":null,"service":{"name":"stencil-webhook","namespace":"stencil-system","path":"/convert"}}}}}}`)
	t.Cleanup(func() {
		restore := strings.Replace(conv, `"clientConfig":{`, `"clientConfig":{"service":null,`, 1)
		if out, err := kubectlAdmin("patch", "crd", converting, "--type=merge", "-p", `{"spec":{"conversion":`+restore+`}}`); err != nil { // t.Context() is done by now
			t.Errorf("pointing the CRD back at the suite's operator: %v\n%s", err, out)
		}
	})
}
