//go:build tools

// Package tools records the commands this module builds, so `go mod tidy`
// keeps their dependencies.
package tools

import _ "helm.sh/helm/v4/cmd/helm"
