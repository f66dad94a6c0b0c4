package main

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// result is what one contender did for one N.
type result struct {
	Contender string        `json:"contender"`
	N         int           `json:"n"`
	Converge  time.Duration `json:"convergeNanoseconds"`
	// Runs are the converge times of every run, when there were several.
	Runs []time.Duration `json:"runsNanoseconds,omitempty"`
	// Requests are those the API server received from the contender while
	// it converged.
	Requests requests `json:"requests"`
	// ClientRequests is stencil's own rest_client_requests_total at
	// convergence, to check the audit log.
	ClientRequests int `json:"clientRequests,omitempty"`
	// Reconciles of MyWebs until convergence.
	Reconciles int `json:"reconciles,omitempty"`
	// Settle are stencil's requests between convergence and the quiet window.
	Settle      requests      `json:"settle,omitempty"`
	Quiet       requests      `json:"quiet,omitempty"`
	QuietWindow time.Duration `json:"quietWindowNanoseconds,omitempty"`
	Drift       driftFigures  `json:"drift,omitzero"`
	Health      healthFigures `json:"health,omitzero"`
	// Preview is `stencil diff --all` over the converged MyWebs.
	Preview previewFigures `json:"preview,omitzero"`
	// Restart is what a new process over the converged MyWebs cost.
	Restart    restartFigures `json:"restart,omitzero"`
	PeakRSSKiB int64          `json:"peakRSSKiB"`
	// FileRSSKiB is the part of the RSS at the end that is file-backed: the
	// binary's pages.
	FileRSSKiB int64 `json:"fileRSSKiB"`
	// ConvergeCPUSeconds is stencil's CPU time at convergence; CPUSeconds
	// at the end (the raw loop exits when it has converged).
	ConvergeCPUSeconds float64 `json:"convergeCPUSeconds,omitempty"`
	CPUSeconds         float64 `json:"cpuSeconds"`
	// ControlPlaneCPUSeconds is what kube-apiserver and etcd spent while
	// the contender converged.
	ControlPlaneCPUSeconds float64 `json:"controlPlaneCPUSeconds"`
	// StealSeconds is the CPU time the hypervisor took from the machine
	// while the contender converged.
	StealSeconds float64 `json:"stealSeconds"`
	HeapTop      string  `json:"heapTop,omitempty"`
	// Error says why the contender's run failed (the peers bench records
	// it and goes on with the others).
	Error string `json:"error,omitempty"`
}

// combine folds runs of one contender into one result: the last run's,
// with the median run's converge time, CPU and steal, every run's converge
// time, and the highest peak RSS.
func combine(runs []*result) *result {
	r := *runs[len(runs)-1]
	sorted := slices.SortedFunc(slices.Values(runs), func(a, b *result) int { return cmp.Compare(a.Converge, b.Converge) })
	median := sorted[len(sorted)/2]
	r.Converge, r.ConvergeCPUSeconds, r.ControlPlaneCPUSeconds = median.Converge, median.ConvergeCPUSeconds, median.ControlPlaneCPUSeconds
	r.StealSeconds = median.StealSeconds
	if r.Contender != "stencil" {
		r.CPUSeconds = median.CPUSeconds
	}
	r.Runs = nil
	for _, run := range runs {
		r.Runs = append(r.Runs, run.Converge)
		r.PeakRSSKiB = max(r.PeakRSSKiB, run.PeakRSSKiB)
	}
	return &r
}

// row is the three contenders' results for one N, and the
// controller-runtime floor's.
type row struct {
	N                 int     `json:"n"`
	Raw               *result `json:"raw"`
	RawStatus         *result `json:"rawStatus"`
	Stencil           *result `json:"stencil"`
	ControllerRuntime *result `json:"controllerRuntimeFloor"`
}

func (r row) contenders() []*result { return []*result{r.Raw, r.RawStatus, r.Stencil} }

// ratio is stencil's converge time over a floor's.
func (r row) ratio(floor *result) float64 {
	return r.Stencil.Converge.Seconds() / floor.Converge.Seconds()
}

// rss is a's peak RSS over b's.
func rss(a, b *result) float64 { return float64(a.PeakRSSKiB) / float64(b.PeakRSSKiB) }

func mib(kib int64) string { return fmt.Sprintf("%.1f MiB", float64(kib)/1024) }

func printRun(r *result) {
	if r.Error != "" {
		fmt.Printf("%s, N = %d: FAILED: %s\n\n", r.Contender, r.N, r.Error)
		return
	}
	fmt.Printf("%s, N = %d: converged in %s with %d requests (%s)\n", r.Contender, r.N, elapsed(r.Converge), r.Requests.total(), r.Requests)
	if r.ConvergeCPUSeconds > 0 { // an operator, not a program that exits when done
		fmt.Printf("  its rest_client_requests_total at convergence: %d; reconciles: %d\n", r.ClientRequests, r.Reconciles)
		if r.QuietWindow > 0 { // the run that went on past convergence
			fmt.Printf("  settling %s: %d requests (%s)\n", settle, r.Settle.total(), r.Settle)
			fmt.Printf("  at rest for %s: %d requests other than watches (%s)\n", r.QuietWindow.Round(time.Second), r.Quiet.total(), r.Quiet)
			fmt.Printf("  drift correction over %d changes: %s\n", r.Drift.Changes, driftSummary(r.Drift))
			if r.Health.Ready > 0 {
				fmt.Printf("  health: every MyWeb Ready %s after the bench began its Deployments' rollout (pods created, then available; writing took %s); %d requests (%s)\n",
					elapsed(r.Health.Ready), elapsed(r.Health.Marked), r.Health.Requests.total(), r.Health.Requests)
			}
			if r.Preview.Took > 0 {
				fmt.Printf("  upgrade preview: stencil diff --all took %s, %d requests (%s), exit %d; %q\n",
					elapsed(r.Preview.Took), r.Preview.Requests.total(), r.Preview.Requests, r.Preview.Exit, r.Preview.Summary)
			}
			checked := elapsed(r.Restart.AllChecked) + " after its start"
			if r.Restart.NotAllChecked {
				checked = "not within " + restartWait.String()
			}
			fmt.Printf("  restart: a change made as the new process began reconciling %s; every resource checked %s, with %d requests (%s)\n",
				restartRevert(r.Restart), checked, r.Restart.Requests.total(), r.Restart.Requests)
		}
		fmt.Printf("  CPU %.2f s at convergence\n", r.ConvergeCPUSeconds)
	}
	fmt.Printf("  peak RSS %s (at the end %s of it the mapped binary), CPU %.2f s in all; kube-apiserver and etcd used %.2f s of CPU while it converged, the hypervisor took %.2f s\n", mib(r.PeakRSSKiB), mib(r.FileRSSKiB), r.CPUSeconds, r.ControlPlaneCPUSeconds, r.StealSeconds)
	if r.HeapTop != "" {
		fmt.Printf("  heap profile (in use, after a GC):\n%s", indent(r.HeapTop))
	}
	fmt.Println()
}

// driftSummary is p50, p99 and max of the reverts, and the changes not
// reverted in time.
func driftSummary(d driftFigures) string {
	s := fmt.Sprintf("p50 %s, p99 %s, max %s", ms(d.P50), ms(d.P99), ms(d.Max))
	if d.Missed > 0 {
		s = fmt.Sprintf("%d of %d not reverted within %s", d.Missed, d.Changes, revertWait)
		if d.Missed < d.Changes {
			s += fmt.Sprintf("; the others p50 %s, p99 %s", ms(d.P50), ms(d.P99))
		}
	}
	return s
}

// restartRevert says when a restart's change was set back.
func restartRevert(f restartFigures) string {
	if f.NotReverted {
		return "was not set back within " + revertWait.String()
	}
	return fmt.Sprintf("was set back in %s (%s after its start)", ms(f.Reverted), elapsed(f.RevertedSinceStart))
}

// convergeRange is the median converge time and, with several runs, the
// range.
func convergeRange(r *result) string {
	if len(r.Runs) < 2 {
		return elapsed(r.Converge)
	}
	return fmt.Sprintf("%s (%.2f–%.2f)", elapsed(r.Converge), slices.Min(r.Runs).Seconds(), slices.Max(r.Runs).Seconds())
}

func ms(d time.Duration) string { return fmt.Sprintf("%.0f ms", float64(d)/float64(time.Millisecond)) }

func indent(s string) string {
	var b strings.Builder
	for line := range strings.Lines(s) {
		b.WriteString("    " + line)
	}
	return b.String()
}

// summary is the two tables that docs/benchmarks.md shows: convergence,
// then cost.
func summary(results []row) string {
	var w strings.Builder
	w.WriteString("| N | converge: raw loop | raw loop + status | stencil | stencil / raw | stencil / (raw + status) | requests: raw / raw + status / stencil | stencil at rest | drift p50 / p99 |\n")
	w.WriteString("|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range results {
		fmt.Fprintf(&w, "| %d | %s | %s | %s | %.2f× | %.2f× | %d / %d / %d | %d in %s | %s / %s |\n",
			r.N, convergeRange(r.Raw), convergeRange(r.RawStatus), convergeRange(r.Stencil), r.ratio(r.Raw), r.ratio(r.RawStatus),
			r.Raw.Requests.total(), r.RawStatus.Requests.total(), r.Stencil.Requests.total(),
			r.Stencil.Quiet.total(), elapsed(r.Stencil.QuietWindow.Round(time.Second)),
			ms(r.Stencil.Drift.P50), ms(r.Stencil.Drift.P99))
	}
	w.WriteString("\n| N | peak RSS: raw loop | controller-runtime floor | stencil | stencil / raw | stencil / floor | mapped binary: raw / floor / stencil | CPU while converging: raw / raw + status / stencil | API server + etcd CPU: raw / raw + status / stencil |\n")
	w.WriteString("|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range results {
		fmt.Fprintf(&w, "| %d | %s | %s | %s | %.2f× | %.2f× | %s / %s / %s | %.2f / %.2f / %.2f s | %.2f / %.2f / %.2f s |\n",
			r.N, mib(r.Raw.PeakRSSKiB), mib(r.ControllerRuntime.PeakRSSKiB), mib(r.Stencil.PeakRSSKiB),
			rss(r.Stencil, r.Raw), rss(r.Stencil, r.ControllerRuntime),
			mib(r.Raw.FileRSSKiB), mib(r.ControllerRuntime.FileRSSKiB), mib(r.Stencil.FileRSSKiB),
			r.Raw.CPUSeconds, r.RawStatus.CPUSeconds, r.Stencil.ConvergeCPUSeconds,
			r.Raw.ControlPlaneCPUSeconds, r.RawStatus.ControlPlaneCPUSeconds, r.Stencil.ControlPlaneCPUSeconds)
	}
	return w.String()
}

// writeResults writes results.json, results.md (the summary and each run's
// requests) and converge.svg into dir.
func writeResults(dir string, results []row, notes string) error {
	js, err := json.MarshalIndent(results, "", "  ")
	if err != nil {
		return err
	}
	var md bytes.Buffer
	fmt.Fprintf(&md, "Measured %s with Go %s on %d CPUs (`make bench`)%s, at %s.\n\n", time.Now().UTC().Format("2006-01-02 15:04"), runtime.Version(), runtime.NumCPU(), pinNote(), revision())
	md.WriteString(summary(results))
	md.WriteString(notes)
	fmt.Fprintln(&md, "\nRequests while converging, by verb and resource (from the API server's audit log):")
	fmt.Fprintln(&md)
	for _, row := range results {
		for _, r := range append(row.contenders(), row.ControllerRuntime) {
			fmt.Fprintf(&md, "- %s, N = %d: %s\n", r.Contender, r.N, r.Requests)
		}
	}
	svg, err := plotConverge(results)
	if err != nil {
		return err
	}
	return writeFiles(dir, map[string][]byte{"results.json": append(js, '\n'), "results.md": md.Bytes(), "converge.svg": svg})
}

func writeFiles(dir string, files map[string][]byte) error {
	names := slices.Sorted(maps.Keys(files))
	for _, name := range names {
		if err := os.WriteFile(filepath.Join(dir, name), files[name], 0o644); err != nil {
			return err
		}
	}
	fmt.Printf("Wrote %s to %s.\n", strings.Join(names, ", "), dir)
	return nil
}

// plotConverge draws converge time against N for the three contenders.
func plotConverge(results []row) ([]byte, error) {
	series := make([]series, 3)
	for i, name := range []string{"raw server-side-apply loop", "raw loop + one status write per MyWeb", "stencil"} {
		series[i].name = name
		for _, r := range results {
			series[i].points = append(series[i].points, plotter.XY{X: float64(r.N), Y: r.contenders()[i].Converge.Seconds()})
		}
	}
	return plotSeries(series)
}

// plotPeers draws converge time against N for every contender of the peers.
func plotPeers(rows []peerRow) ([]byte, error) {
	var all []series
	for i, r := range rows[0].Results {
		s := series{name: r.Contender}
		for _, row := range rows {
			// The last row may not have every contender yet (the results are
			// written after each), and a failed run has no time.
			if i < len(row.Results) && row.Results[i].Error == "" {
				s.points = append(s.points, plotter.XY{X: float64(row.N), Y: row.Results[i].Converge.Seconds()})
			}
		}
		all = append(all, s)
	}
	return plotSeries(all)
}

// series is one line of a plot.
type series struct {
	name   string
	points plotter.XYs
}

// plotSeries draws converge time against N, a line per series, as SVG.
func plotSeries(lines []series) ([]byte, error) {
	p := plot.New()
	p.Title.Text = "Time to converge N MyWebs (3 objects each)"
	p.X.Label.Text = "N"
	p.Y.Label.Text = "seconds"
	p.Y.Min = 0
	args := make([]any, 0, 2*len(lines))
	for _, l := range lines {
		args = append(args, l.name, l.points)
	}
	if err := plotutil.AddLinePoints(p, args...); err != nil {
		return nil, err
	}
	p.Legend.Top, p.Legend.Left = true, true
	w, err := p.WriterTo(6*vg.Inch, 4*vg.Inch, "svg")
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	if _, err := w.WriteTo(&b); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}
