// Package templates embeds one folder of Go templates per kind
// (templates/<kind>/): *.yaml manifests, a _kind.yaml that declares the
// types they may emit, optional _*.tpl helpers, an optional _status.yaml
// that projects live state into the kind's status, and an optional
// kustomization.yaml. A decorator's folder (templates/<decorator>/) has a
// _decorator.yaml instead of a _kind.yaml: its parent is an existing type.
// Package render reads them as data.
//
// It is not public API: it may change in any release. Depend on pkg/stencil
// and pkg/stenciltest (docs/stability.md).
package templates

import (
	"embed"
	"fmt"
	"io/fs"
)

//go:embed all:memcached all:myweb all:foo all:flightticket all:guestbook all:replicaset-podcount all:namespace-defaults all:appstack
var folders embed.FS

// Kind returns the folder of one kind, by its lower-case name.
func Kind(name string) fs.FS {
	sub, err := fs.Sub(folders, name)
	if err != nil {
		panic(fmt.Sprintf("templates: no folder %q: %v", name, err)) // a programming error, caught by every test
	}
	return sub
}
