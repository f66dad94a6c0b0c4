//go:build tools

// Package tools records the commands this module builds, so `go mod tidy`
// keeps their dependencies.
package tools

import (
	_ "github.com/golangci/golangci-lint/v2/cmd/golangci-lint"
	_ "sigs.k8s.io/controller-tools/cmd/controller-gen"
)
