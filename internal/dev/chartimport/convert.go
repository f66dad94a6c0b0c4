package chartimport

import (
	"bytes"
	"fmt"

	"maps"
	"path"
	"regexp"
	"sigs.k8s.io/yaml"
	"slices"
	"strconv"
	"strings"
)

// Note is what the import could not carry over as it is, or carried over
// with a different meaning: where, why, and what stencil offers instead.
type Note struct {
	File    string
	Line    int // 0: the whole file
	Reason  string
	Instead string
}

func (n Note) String() string {
	where := n.File
	if n.Line > 0 {
		where = fmt.Sprintf("%s:%d", n.File, n.Line)
	}
	if n.Instead == "" {
		return where + ": " + n.Reason
	}
	return where + ": " + n.Reason + "; " + n.Instead
}

// Folder is a chart kind's template folder, by file name, without its
// _kind.yaml (see [Declare]), and the notes of its conversion.
type Folder struct {
	Files map[string][]byte
	Notes []Note
	// Hooks are the files of hooks, by name, and when they come: before
	// or after the others (see [Folder.graph]).
	Hooks map[string]string
	// Missing are the dependencies Chart.yaml lists that are not under
	// charts/ (not vendored).
	Missing []string
	// HookWeights are the hooks' helm.sh/hook-weight, by name (0 when
	// unset): a hook comes after the hooks of its phase that weigh less.
	HookWeights map[string]int
	// Tpl is the kind's tpl policy, as _kind.yaml declares it ("": own,
	// the default; any: the resources' values run as templates too).
	Tpl string
}

// Convert makes the chart's kind folder: Chart.yaml as _chart.yaml,
// values.yaml as _values.yaml (values.schema.json as _values.schema.json),
// the templates and helpers under flat names ("--" for "/"), the files
// .Files reads under _files/, and each subchart's under _charts/<name>/
// and charts--<name>--*.
func Convert(c *Chart) (*Folder, error) {
	f := &Folder{Files: map[string][]byte{}, Hooks: map[string]string{}, HookWeights: map[string]int{}}
	f.addChart(c, "", "")
	subs, err := c.Subcharts()
	if err != nil {
		return nil, err
	}
	for p := range c.Files {
		if strings.HasPrefix(p, "crds/") {
			f.note("crds/", 0, "the chart's CRDs are not installed by the kind (helm template leaves them out too)", "install them with the operator (config/crd/external for their schemas), or let another tool own them")
			break
		}
	}
	for _, d := range c.dependencies(subs) {
		sub := subs[d.Name]
		switch {
		case sub == nil:
			f.note("Chart.yaml", 0, "the dependency "+d.Name+" is not under charts/: it is left out", "vendor it (helm dependency build) and import again")
			f.Missing = append(f.Missing, d.Name)
			continue
		case len(d.Tags) > 0:
			f.note("Chart.yaml", 0, "the dependency "+d.key()+"'s tags are not read: only its condition turns it off", "")
		case len(d.ImportValues) > 0:
			f.note("Chart.yaml", 0, "the dependency "+d.key()+"'s import-values are not imported", "set those values under "+d.key()+" in the spec")
		}
		if nested, _ := sub.Subcharts(); len(nested) > 0 {
			f.note("charts/"+d.Name, 0, "a subchart with subcharts of its own is not imported", "import it as a kind of its own, or vendor its subcharts' templates into it")
			continue
		}
		f.addChart(sub, "_charts/"+d.key()+"/", "charts--"+d.key()+"--")
	}
	slices.SortFunc(f.Notes, func(a, b Note) int {
		return strings.Compare(fmt.Sprintf("%s:%06d", a.File, a.Line), fmt.Sprintf("%s:%06d", b.File, b.Line))
	})
	return f, nil
}

// dependency is one of Chart.yaml's dependencies.
type dependency struct {
	Name, Alias, Condition string
	Tags                   []any `json:"tags"`
	ImportValues           []any `json:"import-values"`
}

// key is the name the dependency's values and templates go by: its
// alias, else its name.
func (d dependency) key() string {
	if d.Alias != "" {
		return d.Alias
	}
	return d.Name
}

// dependencies are the chart's subcharts as Chart.yaml lists them, then
// those under charts/ it does not list (Helm renders them too).
func (c *Chart) dependencies(subs map[string]*Chart) []dependency {
	var meta struct {
		Dependencies []dependency `json:"dependencies"`
	}
	_ = yaml.Unmarshal(c.Files["Chart.yaml"], &meta)
	listed := map[string]bool{}
	for _, d := range meta.Dependencies {
		listed[d.Name] = true
	}
	out := meta.Dependencies
	for _, name := range slices.Sorted(maps.Keys(subs)) {
		if !listed[name] {
			out = append(out, dependency{Name: name})
		}
	}
	return out
}

func mapsKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

func (f *Folder) note(file string, line int, reason, instead string) {
	n := Note{File: file, Line: line, Reason: reason, Instead: instead}
	if !slices.Contains(f.Notes, n) {
		f.Notes = append(f.Notes, n)
	}
}

// addChart adds one chart: its own files under meta (the _chart.yaml,
// _values.yaml and _files/ folder), its templates named with prefix.
func (f *Folder) addChart(c *Chart, meta, prefix string) {
	where := strings.TrimSuffix(strings.TrimPrefix(meta, "_"), "/")
	f.Files[meta+"_chart.yaml"] = c.Files["Chart.yaml"]
	f.Files[meta+"_values.yaml"] = c.Files["values.yaml"]
	if s, ok := c.Files["values.schema.json"]; ok {
		f.Files[meta+"_values.schema.json"] = s
	}
	readsFiles := false
	for _, p := range slices.Sorted(maps.Keys(c.Files)) {
		rel, ok := strings.CutPrefix(p, "templates/")
		if !ok {
			continue
		}
		shown := path.Join(where, p)
		if name, keep := f.template(shown, rel, prefix, c.Files[p]); keep {
			f.Files[prefix+name] = c.Files[p]
			readsFiles = readsFiles || strings.Contains(string(c.Files[p]), ".Files.")
		}
	}
	if readsFiles {
		for p, data := range c.Files {
			if chartFile(p) {
				f.Files[meta+"_files/"+p] = data
			}
		}
	}
}

// chartFile: p is one of the chart's files that .Files may read (not
// its templates, subcharts, values or metadata).
func chartFile(p string) bool {
	switch {
	case strings.HasPrefix(p, "templates/"), strings.HasPrefix(p, "charts/"), strings.HasPrefix(p, "ci/"):
		return false
	}
	switch p {
	case "Chart.yaml", "Chart.lock", "values.yaml", "values.schema.json", ".helmignore":
		return false
	}
	return true
}

var (
	// A hook's annotations, as YAML (helm.sh/hook: post-install) or as
	// a template's dict, a quoted key then a quoted value ("helm.sh/hook"
	// "post-install"): not a word after the name in a comment.
	testHook = regexp.MustCompile(`helm\.sh/hook["']?\s*:\s*["']?test|"helm\.sh/hook"\s+"test`)
	hook     = regexp.MustCompile(`helm\.sh/hook["']?\s*:\s*["']?([a-z,-]+)|"helm\.sh/hook"\s+"([a-z,-]+)"`)
	weight   = regexp.MustCompile(`helm\.sh/hook-weight["']?\s*:\s*["']?(-?[0-9]+)["']?|"helm\.sh/hook-weight"\s+"(-?[0-9]+)"`)
)

// template decides the kind folder's name of the chart's template file rel
// (shown as shown in notes; the name is prefix's, a subchart's), or that
// it is left out, and notes what changes.
func (f *Folder) template(shown, rel, prefix string, src []byte) (string, bool) {
	name := strings.ReplaceAll(rel, "/", "--")
	switch ext := path.Ext(rel); {
	case path.Base(rel) == "NOTES.txt":
		f.note(shown, 0, "NOTES.txt is dropped: there is no install to print it after", "say what a user needs in the kind's status (a _status.yaml template) or its docs")
		return "", false
	case testHook.Match(src), strings.HasPrefix(rel, "tests/"):
		f.note(shown, 0, "a helm test hook is skipped: stencil has no `helm test`", "check the release in the kind's tests or the e2e")
		return "", false
	case ext == ".tpl":
	case ext == ".yaml" || ext == ".yml":
		name = strings.TrimSuffix(name, ext) + ".yaml"
	default:
		f.note(shown, 0, "not a .yaml or .tpl template: left out", "rename it .yaml (a manifest) or .tpl (helpers only)")
		return "", false
	}
	if strings.HasPrefix(name, "_") && path.Ext(name) == ".yaml" {
		f.note(shown, 0, "a manifest whose name begins with _ renders nothing in Helm", "")
	}
	if m := firstGroup(hook.FindSubmatch(src)); m != nil {
		switch phase := hookPhase(string(m[1])); phase {
		case "":
			f.note(shown, 0, "a "+string(m[1])+" hook is left out: stencil has no delete or rollback moment to run it at", "a graph kind deletes its objects in reverse order; a finalizer of your own runs what must happen on delete")
			return "", false
		case hookBefore:
			f.note(shown, 0, "a "+string(m[1])+" hook becomes a graph node that every other template waits for (ready: a Job complete), run once for what it renders (once: true)", "a Job's pod template is immutable: annotate it stencil.dev/force: enabled for stencil to recreate it when it changes, as before-hook-creation does; hook-delete-policy has no other effect")
		case hookAfter:
			f.note(shown, 0, "a "+string(m[1])+" hook becomes a graph node after every other template, run once for what it renders (once: true)", "hook-delete-policy has no effect: the objects stay until their TTL or someone removes them, and are not made again")
		}
		f.Hooks[prefix+name] = hookPhase(string(m[1]))
		if w := firstGroup(weight.FindSubmatch(src)); w != nil {
			f.HookWeights[prefix+name], _ = strconv.Atoi(string(w[1]))
		} else if bytes.Contains(src, []byte("helm.sh/hook-weight")) {
			f.note(shown, 0, "a hook-weight that is not a number in the file (a template action) counts as 0", "write the weight as a number")
		}
	}
	f.scan(shown, src)
	return name, true
}

// firstGroup is a match of a rule with alternatives, each of one group,
// as a match of its first group: the group that matched.
func firstGroup(m [][]byte) [][]byte {
	if m == nil {
		return nil
	}
	for _, g := range m[1:] {
		if g != nil {
			return [][]byte{m[0], g}
		}
	}
	return m
}

// scans are the template lines whose meaning changes in stencil.
var scans = []struct {
	re              *regexp.Regexp
	reason, instead string
	// text: the rule reads the template's text (a literal namespace
	// line); else only its actions, so that a CRD's `format: date-time`
	// or a word in a comment is not a clock function.
	text bool
}{
	{regexp.MustCompile(`\blookup\b`), "lookup answers the resource's own objects, by name; anything else (another owner's object, a list, a type the kind does not own) is an empty map, as in helm template", "to read another object, declare it under inputs in _kind.yaml and read it with input (a graph kind)", false},
	{regexp.MustCompile(`^\s*namespace:\s*[^{\s]|^\s*namespace:\s*\{\{[^}]*\.Values`), "an object in a namespace of its own is refused at render: a kind's objects are in its resource's namespace", "create the resource in that namespace, or leave the object out", true},
	{regexp.MustCompile(`\b(randAlphaNum|randAlpha|randAscii|randNumeric|randInt|randBytes|uuidv4|genPrivateKey|genCA|genCAWithKey|genSelfSignedCert|genSelfSignedCertWithKey|genSignedCert|genSignedCertWithKey|now|htpasswd|bcrypt|encryptAES|shuffle)\b`), "a generated value (random, a key, a certificate, the time) is made at the resource's first render and kept: every later render sees the same one, where Helm makes a new one at every upgrade", "to change it, delete the resource's Secret stencil-generated-<uid> (docs/from-helm.md)", false},
	{regexp.MustCompile(`\b(env|expandenv|getHostByName|ago)\b`), "env, expandenv, getHostByName and ago are refused at render: a render does not read the operator's environment, the network or the clock", "make the value a field of the spec", false},
	{regexp.MustCompile(`\.Release\.(IsUpgrade|IsInstall|Revision)\b`), ".Release.IsInstall is always true, .IsUpgrade false and .Revision 1, as in helm template", "stencil applies the same objects on every reconcile", false},
	{regexp.MustCompile(`\.Capabilities\.HelmVersion\b`), ".Capabilities.HelmVersion is the Helm release whose template semantics stencil follows (v4.3.0), not a Helm binary's", "", false},
	{regexp.MustCompile(`\.Subcharts\b`), ".Subcharts is not there", "read a subchart's values under .Values.<name>", false},
	{regexp.MustCompile(`\btoToml\b`), "toToml is not a stencil template function", "write the file with toYaml or toJson", false},
}

func (f *Folder) scan(shown string, src []byte) {
	actions := strings.Split(actionsOnly(src), "\n")
	for i, line := range strings.Split(string(src), "\n") {
		for _, s := range scans {
			if s.text && s.re.MatchString(line) || !s.text && s.re.MatchString(actions[i]) {
				f.note(shown, i+1, s.reason, s.instead)
			}
		}
	}
}

// action is a template action; a comment is one that begins with /*.
var action = regexp.MustCompile(`(?s)\{\{-?\s*(.*?)\s*-?\}\}`)

// actionsOnly is src with everything but its actions (not comments)
// blanked, line breaks kept: what the action rules read, line by line.
func actionsOnly(src []byte) string {
	out := make([]byte, len(src))
	for i, b := range src {
		out[i] = ' '
		if b == '\n' {
			out[i] = '\n'
		}
	}
	for _, m := range action.FindAllSubmatchIndex(src, -1) {
		if strings.HasPrefix(string(src[m[2]:m[3]]), "/*") {
			continue
		}
		copy(out[m[0]:m[1]], src[m[0]:m[1]])
	}
	return string(out)
}
