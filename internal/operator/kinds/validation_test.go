package kinds_test

import (
	"strings"
	"testing"
)

// TestInvalidResourcesAreRefused covers every validation rule of the seed
// kinds: kubectl apply is refused by the API server with a message that
// names the field.
func TestInvalidResourcesAreRefused(t *testing.T) {
	const (
		memcached         = "apiVersion: cache.example.com/v1\nkind: Memcached\nmetadata: {name: bad}\nspec: "
		memcachedV1alpha1 = "apiVersion: cache.example.com/v1alpha1\nkind: Memcached\nmetadata: {name: bad}\nspec: "
		myweb             = "apiVersion: operator.k8s-summit.org/v1\nkind: MyWeb\nmetadata: {name: bad}\nspec: "
		foo               = "apiVersion: samplecontroller.k8s.io/v1alpha1\nkind: Foo\nmetadata: {name: bad}\nspec: "
		ticket            = "apiVersion: flights.com/v1\nkind: FlightTicket\nmetadata: {name: bad}\nspec: "
		guestbook         = "apiVersion: webapp.my.domain/v1\nkind: Guestbook\nmetadata: {name: bad}\nspec: "
	)
	tests := []struct {
		name, manifest, field string
	}{
		{"memcached size below 0", memcached + "{size: -1}", "spec.size"},
		{"memcached v1alpha1 size above 100", memcachedV1alpha1 + "{size: 101}", "spec.size"},
		{"memcached size above 100", memcached + "{size: 101}", "spec.size"},
		{"memcached drift policy", memcached + "{size: 1, driftPolicy: Ignore}", "spec.driftPolicy"},
		{"myweb node port below range", myweb + "{image: nginx, nodePortNumber: 29999}", "spec.nodePortNumber"},
		{"myweb node port above range", myweb + "{image: nginx, nodePortNumber: 32768}", "spec.nodePortNumber"},
		{"myweb empty image", myweb + `{image: "", nodePortNumber: 30200}`, "spec.image"},
		{"myweb name a number", strings.Replace(myweb, "name: bad", "name: \"123\"", 1) + "{image: nginx, nodePortNumber: 30200}", "metadata.name must be a DNS-1035 label"},
		{"myweb name with a dot", strings.Replace(myweb, "name: bad", "name: a.b", 1) + "{image: nginx, nodePortNumber: 30200}", "metadata.name must be a DNS-1035 label"},
		{"myweb name over 63", strings.Replace(myweb, "name: bad", "name: "+strings.Repeat("a", 64), 1) + "{image: nginx, nodePortNumber: 30200}", "metadata.name must be a DNS-1035 label"},
		{"myweb image with a space", myweb + `{image: "nginx latest", nodePortNumber: 30200}`, "spec.image"},
		{"foo negative replicas", foo + "{deploymentName: ok, replicas: -1}", "spec.replicas"},
		{"foo invalid deployment name", foo + "{deploymentName: Not_Valid, replicas: 1}", "spec.deploymentName"},
		{"foo empty deployment name", foo + `{deploymentName: "", replicas: 1}`, "spec.deploymentName"},
		{"ticket number 0", ticket + "{from: A, to: B, number: 0}", "spec.number"},
		{"ticket number 11", ticket + "{from: A, to: B, number: 11}", "spec.number"},
		{"ticket empty from", ticket + `{from: "", to: B, number: 1}`, "spec.from"},
		{"ticket empty to", ticket + `{from: A, to: "", number: 1}`, "spec.to"},
		{"ticket same from and to", ticket + "{from: A, to: A, number: 1}", "spec.to must differ from spec.from"},
		{"guestbook size 0", guestbook + "{size: 0, configMapName: cm}", "spec.size"},
		{"guestbook size 11", guestbook + "{size: 11, configMapName: cm}", "spec.size"},
		{"guestbook empty config map name", guestbook + `{size: 1, configMapName: ""}`, "spec.configMapName"},
		{"guestbook config map name over 15", guestbook + "{size: 1, configMapName: abcdefghijklmnop}", "spec.configMapName"},
		{"guestbook config map name not a label", guestbook + "{size: 1, configMapName: Bad_Name}", "spec.configMapName"},
		{"guestbook alias", guestbook + "{size: 1, configMapName: cm, alias: Email}", "spec.alias"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := kubectl(t, tt.manifest, "apply", "-n", "default", "-f", "-")
			if err == nil {
				t.Fatalf("kubectl apply accepted:\n%s\n%s", tt.manifest, out)
			}
			if !strings.Contains(out, tt.field) {
				t.Errorf("refused, but the message does not name %s:\n%s", tt.field, out)
			}
		})
	}
}
