//go:build e2e

package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestTenantCannotSteerStencil installs stencil's admission policy
// (config/policy, part of `make deploy` and the chart) and acts as alice, a
// tenant who may edit everything in her namespace (the built-in edit role,
// and MyWebs). She cannot forge the keys that steer stencil: an owner label
// on her own objects or in a pod template (which would get them cached and
// wake another tenant's resource), a shard label or a prune-pending mark on
// her MyWeb. What she may do still works, and so does stencil: her MyWeb
// becomes Ready (stencil labels its objects, the cluster's controllers copy
// the labels to pods), she changes its spec and labels, and edits one of its
// objects (drift, which stencil reverts).
func TestTenantCannotSteerStencil(t *testing.T) {
	const ns = "tenant-a"
	mustKubectl(t, "create", "namespace", ns)
	t.Cleanup(func() { _, _ = kubectl(t, "delete", "namespace", ns, "--wait=false") })
	mustKubectl(t, "apply", "-k", "../config/policy")
	t.Cleanup(func() { _, _ = kubectl(t, "delete", "-k", "../config/policy") })
	mustKubectl(t, "-n", ns, "create", "rolebinding", "alice-edit", "--clusterrole=edit", "--user=alice")
	mustKubectl(t, "-n", ns, "create", "role", "mywebs", "--verb=*", "--resource=mywebs.operator.k8s-summit.org")
	mustKubectl(t, "-n", ns, "create", "rolebinding", "alice-mywebs", "--role=mywebs", "--user=alice")
	alice := func(args ...string) (string, error) {
		return kubectl(t, append([]string{"--as=alice", "-n", ns}, args...)...)
	}
	// deniedAsAlice applies manifest as alice, and returns why the API
	// server refused it ("" when it did not).
	deniedAsAlice := func(manifest string) string {
		if _, err := alice("apply", "-f", writeFile(t, manifest)); err != nil {
			return err.Error()
		}
		return ""
	}

	denied := []struct{ what, manifest string }{
		{"an owner label on her ConfigMap", `{apiVersion: v1, kind: ConfigMap, metadata: {name: forged, labels: {app.kubernetes.io/managed-by: stencil, stencil.dev/owner-uid: "0000"}}}`},
		{"an owner annotation on her ConfigMap", `{apiVersion: v1, kind: ConfigMap, metadata: {name: forged, annotations: {stencil.dev/owner: MyWeb.operator.k8s-summit.org/other/web}}}`},
		{"an owner label in a pod template", `{apiVersion: apps/v1, kind: Deployment, metadata: {name: forged}, spec: {replicas: 0, selector: {matchLabels: {app: forged}},
  template: {metadata: {labels: {app: forged, stencil.dev/owner-uid: "0000"}}, spec: {containers: [{name: c, image: nginx}]}}}}`},
		{"a shard label on her MyWeb", `{apiVersion: operator.k8s-summit.org/v1, kind: MyWeb, metadata: {name: sharded, labels: {stencil.dev/shard: b}},
  spec: {image: nginx, nodePortNumber: 30310, pageContentHtml: hi}}`},
		{"a prune-pending mark on her MyWeb", `{apiVersion: operator.k8s-summit.org/v1, kind: MyWeb, metadata: {name: marked, annotations: {stencil.dev/prune-pending: "true"}},
  spec: {image: nginx, nodePortNumber: 30311, pageContentHtml: hi}}`},
	}
	// The API server takes the policy up within a second or so.
	eventually(t, 30*time.Second, "the policy in force", func() error {
		if why := deniedAsAlice(denied[0].manifest); !strings.Contains(why, "only stencil sets") {
			_, _ = alice("delete", "configmap", "forged", "--ignore-not-found")
			return fmt.Errorf("not denied yet: %q", why)
		}
		return nil
	})
	for _, d := range denied {
		if why := deniedAsAlice(d.manifest); !strings.Contains(why, "only stencil sets") || !strings.Contains(why, "alice may not") {
			t.Errorf("%s: %q, want denied by stencil's policy", d.what, why)
		}
	}

	// What she may do.
	if why := deniedAsAlice(`{apiVersion: operator.k8s-summit.org/v1, kind: MyWeb, metadata: {name: web}, spec: {image: nginx, nodePortNumber: 30312, pageContentHtml: hello}}`); why != "" {
		t.Fatalf("alice's MyWeb: %s", why)
	}
	mustKubectl(t, "-n", ns, "wait", "myweb/web", "--for=condition=Ready", "--timeout=90s")
	for _, args := range [][]string{
		{"label", "myweb", "web", "team=a"},
		{"patch", "myweb", "web", "--type=merge", "-p", `{"spec":{"pageContentHtml":"hello again"}}`},
		{"patch", "configmap", "web-html", "--type=merge", "-p", `{"data":{"index.html":"drifted"}}`},
	} {
		if out, err := alice(args...); err != nil {
			t.Errorf("alice: kubectl %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	eventually(t, 30*time.Second, "stencil sets alice's new page and reverts her edit of its ConfigMap", func() error {
		if html := mustKubectl(t, "-n", ns, "get", "configmap", "web-html", "-o", `jsonpath={.data.index\.html}`); html != "hello again" {
			return fmt.Errorf("index.html %q", html)
		}
		return nil
	})
	mustKubectl(t, "-n", ns, "wait", "myweb/web", "--for=condition=Ready", "--timeout=60s")
}
