// Package config embeds the deployment files that a project made by
// `stencil init` starts from: the manager Deployment, its RBAC (all but the
// generated ClusterRole), the admission policy on stencil's control keys and
// the kustomizations that tie them together. The project gets them with its
// own name where these say stencil (internal/dev/scaffold), so that an install
// of stencil and of a project never share a name.
//
// It is not public API: it may change in any release. Depend on pkg/stencil
// and pkg/stenciltest (docs/stability.md).
package config

import "embed"

// Project holds the files, by their path under config/.
//
//go:embed default/kustomization.yaml manager/kustomization.yaml manager/manager.yaml manager/network_policy.yaml
//go:embed rbac/kustomization.yaml rbac/service_account.yaml rbac/role_binding.yaml rbac/leader_election.yaml rbac/metrics_auth.yaml
//go:embed policy/kustomization.yaml policy/control_keys.yaml
var Project embed.FS
