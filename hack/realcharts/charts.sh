#!/bin/sh
# Fetches the real charts of docs/from-helm.md at their commits into DIR
# (default /tmp/realcharts), vendors their subcharts from the same
# repositories, and writes the three values files the table adds (so that
# a chart that generates a password on install renders without one).
# Then: go run ./hack/realcharts -helm bin/helm DIR/*
#
# REPOS may name a folder of bare clones (owner+name/repo) to read
# instead of cloning from GitHub.
set -eu
D=${1:-/tmp/realcharts}
C=$D/charts
mkdir -p "$C" "$D/repos"

repo() { # owner/name commit: a git dir holding the commit
	dir=${REPOS:+$REPOS/$(echo "$1" | tr / +)/repo}
	if [ -z "$dir" ] || [ ! -d "$dir" ]; then
		dir=$D/repos/$(echo "$1" | tr / +)
		[ -d "$dir" ] || git clone -q --bare --filter=blob:none "https://github.com/$1" "$dir"
	fi
	echo "$dir"
}
x() { # owner/name commit path target strip
	mkdir -p "$4"
	git --git-dir="$(repo "$1")" archive "$2" "$3" | tar -x -C "$4" --strip-components="$5"
}

P=prometheus-community/helm-charts; PC=cf408a290aec489277a94450bb3511432477a53a
x $P $PC charts/alertmanager $C/alertmanager 2
x $P $PC charts/prometheus-operator-admission-webhook $C/admission-webhook 2
x $P $PC charts/prometheus-node-exporter $C/node-exporter 2
x $P $PC charts/prometheus $C/prometheus 2
x $P $PC charts/kube-state-metrics $C/kube-state-metrics 2
for s in alertmanager kube-state-metrics prometheus-node-exporter prometheus-pushgateway; do
	x $P $PC charts/$s $C/prometheus/charts/$s 2
done
x bitnami/charts 5165628ae06697f8f68a670bef7739d93c4b7f44 bitnami/postgresql $C/postgresql 2
x bitnami/charts 5165628ae06697f8f68a670bef7739d93c4b7f44 bitnami/common $C/postgresql/charts/common 2
x grafana/helm-charts 34e98e4203000f573df2bf7653f63a8c722e04aa charts/grafana $C/grafana 2
x traefik/traefik-helm-chart a8a66d0098703627b2cf352c66b1725c196a734a traefik $C/traefik 1
x kubernetes-sigs/metrics-server 5ed5d3a2cf940a8c7541cfbac19af822f4c97844 charts/metrics-server $C/metrics-server 2
x bitnami/charts 5165628ae06697f8f68a670bef7739d93c4b7f44 bitnami/redis $C/redis 2
x bitnami/charts 5165628ae06697f8f68a670bef7739d93c4b7f44 bitnami/common $C/redis/charts/common 2
x cert-manager/cert-manager 2d0d7f7f74241a9cbf79f0e2a7bb247238ee09fd deploy/charts/cert-manager $C/cert-manager 3
x kubernetes/ingress-nginx dbb11b92ddb77bee9c35e462479129354c84f939 charts/ingress-nginx $C/ingress-nginx 2
x argoproj/argo-helm af0a9310bacbaa4636018dfe22c801a6d33a5c43 charts/argo-cd $C/argo-cd 2
x DandyDeveloper/charts 2e2539a8960ead2c268f48bdde3b2cdf2b2f1ac8 charts/redis-ha $C/argo-cd/charts/redis-ha 2
x stefanprodan/podinfo eec06d1ea459af4cb4e10e806f8be7c7bd58b361 charts/podinfo $C/podinfo 2
x kubernetes-sigs/external-dns 9f26451346774099a8b3e3e5cc46a53bf2fd1461 charts/external-dns $C/external-dns 2
x fluent/helm-charts 5b81bf7a5a5d9f7c3513810efdef47cdb4e28239 charts/fluent-bit $C/fluent-bit 2

mkdir -p $C/postgresql/ci
printf 'auth:\n  postgresPassword: pg-admin\n  password: app-pass\n  username: app\n  database: app\n' > $C/postgresql/ci/realcharts-passwords-values.yaml
printf 'architecture: replication\nauth:\n  postgresPassword: pg-admin\n  password: app-pass\n  username: app\n  database: app\n  replicationPassword: repl-pass\nmetrics:\n  enabled: true\n' > $C/postgresql/ci/realcharts-replication-values.yaml
printf 'adminPassword: admin-pass\n' > $C/grafana/ci/zz-realcharts-adminpassword-values.yaml
echo "charts in $C"
