// Command onekind is stencil with one of the sample kinds, named by its
// first argument (MyWeb, AppStack, ...), built from the public API (package
// pkg/stencil) as a project that `stencil init` makes is, with a kinds list
// of its own: what a user's operator of that one kind costs. bin/stencil,
// the repository's binary, runs every sample kind: a controller and an
// informer for each kind, and one for each type they own. The other
// arguments are stencil's.
package main

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"

	"github.com/stencil-operator/stencil/pkg/stencil"
	"github.com/stencil-operator/stencil/templates"
)

func main() {
	// BENCH_MEMPROFILERATE samples the heap finer than Go's default (one
	// sample per 512 KiB allocated), for a heap profile that shows small
	// holders too.
	if rate, err := strconv.Atoi(os.Getenv("BENCH_MEMPROFILERATE")); err == nil && rate > 0 {
		runtime.MemProfileRate = rate
	}
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: onekind KIND [stencil's flags]")
		os.Exit(2)
	}
	name := os.Args[1]
	os.Args = append(os.Args[:1], os.Args[2:]...)
	for _, k := range templates.Kinds {
		if k.GroupVersionKind.Kind == name {
			stencil.Main(stencil.Project{Name: strings.ToLower(name), Kinds: []stencil.Kind{k}})
		}
	}
	fmt.Fprintf(os.Stderr, "onekind: no sample kind %q\n", name)
	os.Exit(2)
}
