package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestInitCommitsTheProject: stencil init makes the new project a git
// repository with one commit (make release-crds records it), and leaves a
// folder inside a repository alone.
func TestInitCommitsTheProject(t *testing.T) {
	for k, v := range map[string]string{"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com"} {
		t.Setenv(k, v)
	}
	dir := filepath.Join(t.TempDir(), "widgets")
	if out, code, err := execute(t, "init", dir, "--module", "example.com/widgets", "--tidy=false", "--stencil-checkout", "../.."); code != 0 {
		t.Fatalf("stencil init: exit %d (%v)\n%s", code, err, out)
	}
	git := func(dir string, args ...string) string {
		out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	if log := git(dir, "log", "--format=%s"); log != "Scaffold with stencil init" {
		t.Errorf("git log: %q, want the one commit of stencil init", log)
	}
	if status := git(dir, "status", "--porcelain"); status != "" {
		t.Errorf("files left out of the first commit:\n%s", status)
	}
	inner := filepath.Join(dir, "sub")
	if out, code, err := execute(t, "init", inner, "--module", "example.com/sub", "--tidy=false", "--stencil-checkout", "../.."); code != 0 {
		t.Fatalf("stencil init inside a repository: exit %d (%v)\n%s", code, err, out)
	}
	if _, err := os.Stat(filepath.Join(inner, ".git")); !os.IsNotExist(err) {
		t.Errorf("stencil init inside a repository made another (%v)", err)
	}
}
