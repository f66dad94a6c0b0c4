package docs_test

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// TestChangelogSaysWhatAProjectMustChange: CHANGELOG.md starts with an
// Unreleased section, then one section per release, newest first, each
// with what a project must change; every release tag of the checkout has
// its section (make release refuses a tag without one).
func TestChangelogSaysWhatAProjectMustChange(t *testing.T) {
	data, err := os.ReadFile("../CHANGELOG.md")
	if err != nil {
		t.Fatal(err)
	}
	sections := regexp.MustCompile(`(?m)^## (\S+)`).FindAllStringSubmatchIndex(string(data), -1)
	if len(sections) < 2 || string(data[sections[0][2]:sections[0][3]]) != "Unreleased" {
		t.Fatalf("CHANGELOG.md: want ## Unreleased, then a section per release")
	}
	versions := map[string]bool{}
	for i, s := range sections[1:] {
		version := string(data[s[2]:s[3]])
		end := len(data)
		if i+2 < len(sections) {
			end = sections[i+2][0]
		}
		if !regexp.MustCompile(`^v\d+\.\d+\.\d+$`).MatchString(version) {
			t.Errorf("CHANGELOG.md: section %q is not a version vX.Y.Z", version)
		}
		if !regexp.MustCompile(`(?m)^### What a project (or fork )?must change`).Match(data[s[0]:end]) {
			t.Errorf("CHANGELOG.md: %s says nothing of what a project must change", version)
		}
		versions[version] = true
	}
	out, err := exec.Command("git", "tag", "--list", "v*").Output()
	if err != nil {
		t.Logf("git tag: %v: the tags are not checked", err)
		return
	}
	for tag := range strings.FieldsSeq(string(out)) {
		if !versions[tag] {
			t.Errorf("the release %s has no section in CHANGELOG.md", tag)
		}
	}
}
