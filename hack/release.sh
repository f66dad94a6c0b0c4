#!/bin/sh
# release.sh vX.Y.Z cuts a release of stencil (make release RELEASE=vX.Y.Z): CHANGELOG.md has a section
# "## vX.Y.Z" with a "### What a project must change" part, the tree is
# clean, the kinds' CRDs are kept as released (make release-crds), and the
# commit that records them is tagged vX.Y.Z. Pushing the tag is left to
# the maintainer: `go install github.com/stencil-operator/stencil@vX.Y.Z`
# works once it is public.
set -eu
version=${1:-}
if ! printf '%s\n' "$version" | grep -Eq '^v[0-9]+\.[0-9]+\.[0-9]+$'; then
	echo "release: RELEASE=$version: want vX.Y.Z (make release RELEASE=v0.2.0)" >&2; exit 2
fi
if git rev-parse -q --verify "refs/tags/$version" >/dev/null; then
	echo "release: the tag $version exists" >&2; exit 1
fi
if [ -n "$(git status --porcelain)" ]; then
	echo "release: the tree has changes: commit them first" >&2; exit 1
fi
section=$(awk -v v="## $version" '
	index($0, v) == 1 && (length($0) == length(v) || substr($0, length(v) + 1, 1) == " ") { on = 1; next }
	on && /^## / { exit }
	on { print }' CHANGELOG.md)
if [ -z "$section" ]; then
	echo "release: CHANGELOG.md has no section \"## $version\": rename \"## Unreleased\" to it (and start a new Unreleased)" >&2; exit 1
fi
if ! printf '%s\n' "$section" | grep -q '^### What a project \(or fork \)\{0,1\}must change'; then
	echo "release: CHANGELOG.md's $version has no \"### What a project must change\" (write \"Nothing.\" under it if so)" >&2; exit 1
fi
make release-crds
if [ -n "$(git status --porcelain -- . ':!config/crd/released')" ]; then
	echo "release: make release-crds changed generated files besides config/crd/released: commit them (make generate manifests) and release again" >&2
	git status --short -- . ':!config/crd/released' >&2
	exit 1
fi
git add config/crd/released
git commit -q -m "Release $version" --allow-empty
git tag -a "$version" -m "stencil $version"
echo "release: tagged $version at $(git rev-parse --short HEAD); push it with: git push origin $version"
