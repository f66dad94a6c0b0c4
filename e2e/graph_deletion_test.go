//go:build e2e

package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestForegroundDeletionOfAGraphIsRefused installs stencil's admission
// policies (config/policy) and deletes a Ready AppStack in the foreground
// (kubectl delete --cascade=foreground): the API server refuses it, saying
// why and to delete it in the background, so the garbage collector never
// deletes its objects all at once; the AppStack and every object stay. A
// background deletion (kubectl's default) still goes in reverse order: the
// app first, held here by a finalizer while the database stays
// (TestAppStackGraph checks that order without the policies).
func TestForegroundDeletionOfAGraphIsRefused(t *testing.T) {
	const ns = "graph-foreground"
	mustKubectl(t, "create", "namespace", ns)
	// kubectlAdmin: t.Context(), which kubectl runs under, is done before
	// the cleanups run.
	t.Cleanup(func() { _, _ = kubectlAdmin("delete", "namespace", ns, "--wait=false") })
	mustKubectl(t, "apply", "-k", "../config/policy")
	t.Cleanup(func() { _, _ = kubectlAdmin("delete", "-k", "../config/policy") })
	mustKubectl(t, "apply", "-f", writeFile(t, `apiVersion: stacks.stencil.dev/v1alpha1
kind: AppStack
metadata: {name: shop, namespace: graph-foreground}
spec: {version: "1.0.0"}
`))
	mustKubectl(t, "-n", ns, "wait", "appstack/shop", "--for=condition=Ready", "--timeout=120s")
	objects := []string{"appstack/shop", "secret/shop-db", "statefulset/shop-db", "job/shop-migrate-1-0-0", "deployment/shop"}

	// The API server takes the policy up within a second or so (a dry run
	// is admitted, or refused, as the deletion would be).
	eventually(t, 30*time.Second, "the policy in force", func() error {
		if _, err := kubectl(t, "-n", ns, "delete", "appstack", "shop", "--cascade=foreground", "--dry-run=server"); err == nil {
			return fmt.Errorf("a foreground deletion of the AppStack is admitted")
		}
		return nil
	})
	_, err := kubectl(t, "-n", ns, "delete", "appstack", "shop", "--cascade=foreground")
	for _, want := range []string{"stencil deletes the objects of AppStack shop in the reverse order of its graph", "--cascade=background"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("kubectl delete --cascade=foreground: %v, want refused with %q", err, want)
		}
	}
	// A foregroundDeletion finalizer put on the resource beforehand makes a
	// DELETE that names no policy a foreground one: refused too.
	mustKubectl(t, "-n", ns, "patch", "appstack", "shop", "--type=json", "-p", `[{"op":"add","path":"/metadata/finalizers/-","value":"foregroundDeletion"}]`)
	_, err = kubectl(t, "delete", "--raw", "/apis/stacks.stencil.dev/v1alpha1/namespaces/"+ns+"/appstacks/shop")
	if err == nil || !strings.Contains(err.Error(), "--cascade=background") {
		t.Errorf("a DELETE with no policy of an AppStack that carries foregroundDeletion: %v, want refused", err)
	}
	mustKubectl(t, "-n", ns, "patch", "appstack", "shop", "--type=json", "-p", `[{"op":"test","path":"/metadata/finalizers/1","value":"foregroundDeletion"},{"op":"remove","path":"/metadata/finalizers/1"}]`)
	for _, ref := range objects {
		if ts := mustKubectl(t, "-n", ns, "get", ref, "-o", "jsonpath={.metadata.deletionTimestamp}"); ts != "" {
			t.Errorf("%s is being deleted after a refused foreground deletion", ref)
		}
	}

	// In the background: the app (the last stage) goes first.
	mustKubectl(t, "-n", ns, "patch", "deployment", "shop", "--type=merge", "-p", `{"metadata":{"finalizers":["e2e.stencil.dev/hold"]}}`)
	mustKubectl(t, "-n", ns, "delete", "appstack", "shop", "--wait=false")
	eventually(t, 60*time.Second, "the app being deleted first", func() error {
		if ts := mustKubectl(t, "-n", ns, "get", "deployment", "shop", "-o", "jsonpath={.metadata.deletionTimestamp}"); ts == "" {
			return fmt.Errorf("the app is not being deleted yet")
		}
		return nil
	})
	if ts := mustKubectl(t, "-n", ns, "get", "statefulset", "shop-db", "-o", "jsonpath={.metadata.deletionTimestamp}"); ts != "" {
		t.Error("the database is being deleted while the app, a later stage, is still there")
	}
	mustKubectl(t, "-n", ns, "patch", "deployment", "shop", "--type=json", "-p", `[{"op":"remove","path":"/metadata/finalizers"}]`)
	eventually(t, 90*time.Second, "the AppStack and its objects gone", func() error {
		if left := mustKubectl(t, append([]string{"-n", ns, "get", "-o", "name", "--ignore-not-found"}, objects...)...); strings.TrimSpace(left) != "" {
			return fmt.Errorf("left: %s", left)
		}
		return nil
	})
}
