#!/usr/bin/env bash
# Builds the pinned tools (control plane binaries, kwok, helm, controller-gen,
# golangci-lint) from the tool modules beside this script, and links them into
# BIN_DIR (default: bin/ at the repository root). With PEERS=1 it also builds
# the peers that `make bench-peers` runs: kro, and the Helm operator where the
# module proxy serves github.com/operator-framework/* (where it does not, the
# bench runs without it; docs/benchmarks.md says how to build it from its
# sources).
#
# Builds are cached outside the work tree, keyed by each tool module's go.mod,
# go.sum, build flags and Go version, so a second run, or a fresh clone on the
# same machine, builds nothing. Override the cache with STENCIL_TOOLS_CACHE.
#
# Usage: hack/tools/install.sh [BIN_DIR]
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
bin=${1:-$here/../../bin}
cache=${STENCIL_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/stencil-tools}
export GOTOOLCHAIN=local
# The checksum database does not answer for k8s.io/kubernetes; its go.sum
# lines are committed in the tool module instead.
export GONOSUMDB=k8s.io/kubernetes
mkdir -p "$bin" "$cache"

kube_version=v1.37.0
kube_ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$kube_version -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=37"

# build MODULE LDFLAGS FILE... -- PACKAGE...
# Builds PACKAGEs of tool module MODULE into the cache unless every FILE is
# already there, then links the FILEs into $bin.
build() {
	local module=$1 ldflags=$2
	shift 2
	local files=()
	while [ "$1" != "--" ]; do files+=("$1"); shift; done
	shift
	local key
	key=$( (cat "$here/$module/go.mod" "$here/$module/go.sum"; echo "$ldflags"; go version) | sha256sum | cut -c1-16)
	local dir=$cache/$module-$key
	local missing=0 f
	for f in "${files[@]}"; do [ -e "$dir/$f" ] || missing=1; done
	if [ $missing = 1 ]; then
		echo "building $module tools (${files[*]}), cached in $dir" >&2
		local tmp=$dir.tmp.$$
		rm -rf "$tmp" && mkdir -p "$tmp"
		local out=$tmp/
		# One package builds to the first file's name (etcd's package is named "server").
		[ $# = 1 ] && out=$tmp/${files[0]}
		(cd "$here/$module" && go build -ldflags "$ldflags" -o "$out" "$@")
		if [ "$module" = kwok ]; then kwok_stages "$tmp/kwok-stages.yaml"; fi
		rm -rf "$dir" && mv "$tmp" "$dir"
	fi
	for f in "${files[@]}"; do ln -f "$dir/$f" "$bin/$f" 2>/dev/null || cp -f "$dir/$f" "$bin/$f"; done
}

# kwok_stages FILE writes the Stage objects kwok needs (node start-up,
# node heartbeat with lease, pods that become Running) from the pinned module.
kwok_stages() {
	local src
	src=$(cd "$here/kwok" && go list -m -f '{{.Dir}}' sigs.k8s.io/kwok)/kustomize/stage
	local stage first=1
	for stage in node/fast/node-initialize node/heartbeat-with-lease/node-heartbeat-with-lease pod/fast/pod-ready pod/fast/pod-complete pod/fast/pod-delete; do
		[ $first = 1 ] || echo "---"
		first=0
		cat "$src/$stage.yaml"
	done >"$1"
}

build etcd "-s -w" etcd -- go.etcd.io/etcd/server/v3
build kubernetes "$kube_ldflags" kube-apiserver kube-controller-manager kube-scheduler kubectl -- \
	k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
	k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubectl
build kwok "-s -w" kwok kwok-stages.yaml -- sigs.k8s.io/kwok/cmd/kwok
build helm "-s -w" helm -- helm.sh/helm/v4/cmd/helm
build misc "-s -w" controller-gen golangci-lint -- \
	sigs.k8s.io/controller-tools/cmd/controller-gen github.com/golangci/golangci-lint/v2/cmd/golangci-lint
if [ "${PEERS:-}" = 1 ]; then
	build kro "-s -w" kro -- github.com/kubernetes-sigs/kro/cmd/controller
	# The module proxy serves operator-framework's versions, though it refuses
	# to list them (/@v/list: 403); a proxy that refuses them only costs the
	# bench its Helm operator.
	set +e
	(set -e; build helm-operator "-s -w" helm-operator -- github.com/operator-framework/helm-operator-plugins)
	built=$?
	set -e
	if [ $built != 0 ]; then
		echo "the Helm operator was not built (does the module proxy serve github.com/operator-framework/*?); make bench-peers runs without it unless STENCIL_BENCH_HELM_OPERATOR names its binary (docs/benchmarks.md)" >&2
	fi
fi
