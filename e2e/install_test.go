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
// it creates what it should: the CRDs (established), the RBAC, and the
// operator's Deployment with the image given, which becomes available (its
// pods run on kwok's nodes: the image is never pulled). A second apply
// changes nothing.
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
	mustKubectl(t, "apply", "--server-side", "-f", manifest)
	for _, crd := range []string{"memcacheds.cache.example.com", "mywebs.operator.k8s-summit.org", "foos.samplecontroller.k8s.io", "flighttickets.flights.com", "guestbooks.webapp.my.domain"} {
		mustKubectl(t, "wait", "--for=condition=Established", "crd/"+crd, "--timeout=30s")
	}
	for _, obj := range [][]string{
		{"clusterrole", "stencil-manager"},
		{"clusterrolebinding", "stencil-manager"},
		{"-n", "stencil-system", "serviceaccount", "stencil"},
		{"-n", "stencil-system", "service", "stencil-metrics"},
	} {
		mustKubectl(t, append([]string{"get"}, obj...)...)
	}
	mustKubectl(t, "-n", "stencil-system", "wait", "--for=condition=Available", "deployment/stencil", "--timeout=60s")
	if got := mustKubectl(t, "-n", "stencil-system", "get", "deployment", "stencil", "-o", "jsonpath={.spec.template.spec.containers[0].image}"); got != image {
		t.Errorf("the Deployment runs %q, want %q", got, image)
	}
	if out := mustKubectl(t, "diff", "--server-side", "-f", manifest); strings.TrimSpace(out) != "" {
		t.Errorf("kubectl diff after the apply shows changes:\n%s", out)
	}
}

// TestHelmChart installs the operator's chart (dist/chart, generated from the
// same kustomization) with the helm CLI, as release stencil-helm in its own
// namespace, and checks what it creates: the Deployment with the values
// given, available; cluster-scoped RBAC named after the release and bound
// to the release's ServiceAccount. Uninstalling removes them and keeps the
// CRDs (Helm never deletes a chart's CRDs).
func TestHelmChart(t *testing.T) {
	const release, ns, image = "stencil-helm", "stencil-helm", "example.com/stencil:v0.0.0-helm"
	helm := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(filepath.Join(binDir, "helm"), append(args, "--kubeconfig", cluster.Kubeconfig)...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("helm %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	helm("lint", "../dist/chart", "--set", "image="+image)
	helm("install", release, "../dist/chart", "--namespace", ns, "--create-namespace",
		"--set", "image="+image, "--set", "replicas=1", "--set", "leaderElection=false", "--wait", "--timeout", "2m")
	deployment := mustKubectl(t, "-n", ns, "get", "deployment", "stencil", "-o",
		"jsonpath={.status.availableReplicas} {.spec.template.spec.containers[0].image} {.spec.template.spec.containers[0].args}")
	if want := "1 " + image + ` ["--metrics-bind-address=:8443","--metrics-secure","--health-probe-bind-address=:8081"]`; deployment != want {
		t.Errorf("Deployment: %s, want %s", deployment, want)
	}
	if got := mustKubectl(t, "get", "clusterrolebinding", release+"-manager", "-o", "jsonpath={.roleRef.name} {.subjects[0].namespace}/{.subjects[0].name}"); got != release+"-manager "+ns+"/stencil" {
		t.Errorf("ClusterRoleBinding %s-manager: %s", release, got)
	}
	mustKubectl(t, "wait", "--for=condition=Established", "crd/mywebs.operator.k8s-summit.org", "--timeout=30s")
	helm("uninstall", release, "--namespace", ns, "--wait")
	if out, err := kubectl(t, "get", "clusterrole", release+"-manager"); err == nil {
		t.Errorf("ClusterRole %s-manager left after uninstall: %s", release, out)
	}
	mustKubectl(t, "get", "crd", "mywebs.operator.k8s-summit.org")
}
