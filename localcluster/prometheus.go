package localcluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/flockd/flock/internal/imagebuild"
)

// PrometheusPackage is the Debian package Prometheus and promtool come
// from (bookworm: 2.42), downloaded into <cache>/debs/<arch> like the
// images' packages and unpacked into <cache>/prometheus/bin by Build.
const PrometheusPackage = "prometheus"

// prometheusBinaries are the package's files Build unpacks.
var prometheusBinaries = []string{"prometheus", "promtool"}

// PrometheusBin is the path of the unpacked prometheus or promtool.
func PrometheusBin(cacheRoot, name string) string {
	return filepath.Join(cacheRoot, "prometheus", "bin", name)
}

// buildPrometheus downloads the prometheus package (apt-get download, no
// install) and unpacks its two binaries, unless the ones unpacked came
// from the same .deb.
func buildPrometheus(ctx context.Context, o BuildOptions) error {
	start := time.Now()
	debs, err := imagebuild.Download(ctx, filepath.Join(o.CacheRoot, "debs", runtime.GOARCH), runtime.GOARCH, PrometheusPackage)
	if err != nil {
		return fmt.Errorf("prometheus: %w", err)
	}
	d := debs[0]
	dir := filepath.Join(o.CacheRoot, "prometheus")
	stamp := filepath.Join(dir, stampFile)
	if b, err := os.ReadFile(stamp); err == nil && string(b) == d.String() && prometheusComplete(o.CacheRoot) {
		return nil
	}
	files, err := d.Files(ctx)
	if err != nil {
		return fmt.Errorf("prometheus: %w", err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "bin"), 0o755); err != nil {
		return fmt.Errorf("prometheus: %w", err)
	}
	for _, name := range prometheusBinaries {
		f, ok := files["/usr/bin/"+name]
		if !ok {
			return fmt.Errorf("prometheus: %s has no /usr/bin/%s", d, name)
		}
		p := PrometheusBin(o.CacheRoot, name)
		if err := os.WriteFile(p+".tmp", f.Data, 0o755); err != nil {
			return fmt.Errorf("prometheus: %w", err)
		}
		if err := os.Rename(p+".tmp", p); err != nil {
			return fmt.Errorf("prometheus: %w", err)
		}
	}
	if err := os.WriteFile(stamp, []byte(d.String()), 0o644); err != nil {
		return fmt.Errorf("prometheus: %w", err)
	}
	fmt.Fprintf(o.Progress, "unpacked %s (prometheus, promtool) into %s in %s\n", d, dir, time.Since(start).Round(time.Millisecond))
	return nil
}

func prometheusComplete(cacheRoot string) bool {
	for _, name := range prometheusBinaries {
		if _, err := os.Stat(PrometheusBin(cacheRoot, name)); err != nil {
			return false
		}
	}
	return true
}

// Prometheus is a Prometheus server run by a test or tool on this machine
// (not part of the cluster's default start): it scrapes what its
// configuration says, pod IPs of the real nodes included (routable from the
// host), and evaluates the rule files the configuration names.
type Prometheus struct {
	// URL is its HTTP API, http://127.0.0.1:<port>.
	URL string
	// Log is its output (prometheus.log in its directory).
	Log string

	cmd  *exec.Cmd
	done chan struct{}
}

// StartPrometheus starts the unpacked prometheus with config (a
// prometheus.yml) in dir (its data and log), listening on a free loopback
// port, and waits until it is ready. Stop ends it.
func StartPrometheus(ctx context.Context, cacheRoot, dir string, config []byte) (*Prometheus, error) {
	bin := PrometheusBin(cacheRoot, "prometheus")
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("prometheus not unpacked (run \"make cluster-build\"): %w", err)
	}
	cfg := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfg, config, 0o644); err != nil {
		return nil, fmt.Errorf("prometheus config: %w", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("prometheus port: %w", err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	p := &Prometheus{URL: "http://" + addr, Log: filepath.Join(dir, "prometheus.log"), done: make(chan struct{})}
	logf, err := os.Create(p.Log)
	if err != nil {
		return nil, fmt.Errorf("prometheus log: %w", err)
	}
	defer logf.Close() // the child keeps its own descriptor
	p.cmd = exec.Command(bin, "--config.file="+cfg, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr, "--web.enable-lifecycle")
	p.cmd.Dir = dir
	p.cmd.Stdout, p.cmd.Stderr = logf, logf
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start prometheus: %w", err)
	}
	go func() { _ = p.cmd.Wait(); close(p.done) }()
	for {
		if p.get(ctx, "/-/ready", nil) == nil {
			return p, nil
		}
		select {
		case <-p.done:
			return nil, fmt.Errorf("prometheus exited at start (see %s)", p.Log)
		case <-ctx.Done():
			p.Stop()
			return nil, fmt.Errorf("prometheus not ready (see %s): %w", p.Log, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Stop ends the server (SIGTERM, then SIGKILL after 10 s) and waits for it.
func (p *Prometheus) Stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// Alert is one alert of /api/v1/alerts.
type Alert struct {
	Labels map[string]string `json:"labels"`
	State  string            `json:"state"` // pending or firing
}

// Alerts returns the pending and firing alerts.
func (p *Prometheus) Alerts(ctx context.Context) ([]Alert, error) {
	var r struct {
		Alerts []Alert `json:"alerts"`
	}
	err := p.get(ctx, "/api/v1/alerts", &r)
	return r.Alerts, err
}

// Series is one element of an instant query's vector.
type Series struct {
	Metric map[string]string `json:"metric"`
	Value  [2]any            `json:"value"`
}

// Query evaluates expr now and returns the vector (a query whose result is
// not a vector is an error).
func (p *Prometheus) Query(ctx context.Context, expr string) ([]Series, error) {
	var r struct {
		ResultType string   `json:"resultType"`
		Result     []Series `json:"result"`
	}
	if err := p.get(ctx, "/api/v1/query?query="+url.QueryEscape(expr), &r); err != nil {
		return nil, err
	}
	if r.ResultType != "vector" {
		return nil, fmt.Errorf("query %s: result type %s, want vector", expr, r.ResultType)
	}
	return r.Result, nil
}

// Targets returns each active target's scrape URL and health (up, down,
// unknown) with its last error.
func (p *Prometheus) Targets(ctx context.Context) (map[string]string, error) {
	var r struct {
		ActiveTargets []struct {
			ScrapeURL string `json:"scrapeUrl"`
			Health    string `json:"health"`
			LastError string `json:"lastError"`
		} `json:"activeTargets"`
	}
	if err := p.get(ctx, "/api/v1/targets", &r); err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, t := range r.ActiveTargets {
		out[t.ScrapeURL] = t.Health + " " + t.LastError
	}
	return out, nil
}

// get reads path; with into set, the API's data field into it.
func (p *Prometheus) get(ctx context.Context, path string, into any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.URL+path, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("prometheus %s: %w", path, err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("prometheus %s: %w", path, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("prometheus %s: %s: %s", path, resp.Status, body)
	}
	if into == nil {
		return nil
	}
	var env struct {
		Status string          `json:"status"`
		Data   json.RawMessage `json:"data"`
		Error  string          `json:"error"`
	}
	if err := json.Unmarshal(body, &env); err != nil {
		return fmt.Errorf("prometheus %s: %w", path, err)
	}
	if env.Status != "success" {
		return errors.New("prometheus " + path + ": " + env.Error)
	}
	if err := json.Unmarshal(env.Data, into); err != nil {
		return fmt.Errorf("prometheus %s: %w", path, err)
	}
	return nil
}

// PrometheusConfig turns scrape jobs written for a cluster's Prometheus
// (config/prometheus/scrape.yaml: kubernetes_sd_configs on pods, the
// ServiceAccount's token) into a prometheus.yml for one on this machine:
// Debian's prometheus is built without Kubernetes discovery, so each job
// reads its targets from <dir>/<job>.json (WriteTargets, in the pod
// role's __meta_kubernetes_* labels, so the job's own relabelling runs),
// a credentials_file becomes token, and everything is scraped and
// evaluated every 2 s with the given rule files.
func PrometheusConfig(scrape []byte, dir, token string, ruleFiles ...string) ([]byte, error) {
	var cfg map[string]any
	if err := yaml.Unmarshal(scrape, &cfg); err != nil {
		return nil, fmt.Errorf("scrape config: %w", err)
	}
	jobs, _ := cfg["scrape_configs"].([]any)
	for _, j := range jobs {
		job, ok := j.(map[string]any)
		if !ok {
			return nil, errors.New("scrape config: a job is not a mapping")
		}
		delete(job, "kubernetes_sd_configs")
		job["file_sd_configs"] = []any{map[string]any{
			"files": []any{filepath.Join(dir, fmt.Sprint(job["job_name"])+".json")}, "refresh_interval": "1s",
		}}
		if a, ok := job["authorization"].(map[string]any); ok && a["credentials_file"] != nil {
			a["credentials_file"] = token
		}
	}
	cfg["global"] = map[string]any{"scrape_interval": "2s", "scrape_timeout": "2s", "evaluation_interval": "2s"}
	cfg["rule_files"] = ruleFiles
	return yaml.Marshal(cfg)
}

// PodTargets are the targets Kubernetes' pod discovery gives for pods: one
// per declared container port, labelled as that discovery labels them
// (namespace, name, IP, node, controller, container and port names, the
// pod's labels); pods without an IP are left out.
func PodTargets(pods []corev1.Pod) []TargetGroup {
	var out []TargetGroup
	for _, p := range pods {
		if p.Status.PodIP == "" {
			continue
		}
		for _, c := range p.Spec.Containers {
			for _, port := range c.Ports {
				l := map[string]string{
					"__meta_kubernetes_namespace":                 p.Namespace,
					"__meta_kubernetes_pod_name":                  p.Name,
					"__meta_kubernetes_pod_ip":                    p.Status.PodIP,
					"__meta_kubernetes_pod_node_name":             p.Spec.NodeName,
					"__meta_kubernetes_pod_container_name":        c.Name,
					"__meta_kubernetes_pod_container_port_name":   port.Name,
					"__meta_kubernetes_pod_container_port_number": strconv.Itoa(int(port.ContainerPort)),
				}
				if ref := metav1.GetControllerOf(&p); ref != nil {
					l["__meta_kubernetes_pod_controller_kind"] = ref.Kind
					l["__meta_kubernetes_pod_controller_name"] = ref.Name
				}
				for k, v := range p.Labels {
					l["__meta_kubernetes_pod_label_"+labelName(k)] = v
				}
				addr := net.JoinHostPort(p.Status.PodIP, strconv.Itoa(int(port.ContainerPort)))
				out = append(out, TargetGroup{Targets: []string{addr}, Labels: l})
			}
		}
	}
	return out
}

// labelName is a Kubernetes label key as a Prometheus label name (every
// character outside [a-zA-Z0-9_] becomes _), as the discovery does.
func labelName(k string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' {
			return r
		}
		return '_'
	}, k)
}

// TargetGroup is one entry of a file_sd file.
type TargetGroup struct {
	Targets []string          `json:"targets"`
	Labels  map[string]string `json:"labels"`
}

// WriteTargets writes the file_sd file of job in dir (as a whole, by
// rename: Prometheus re-reads it on change).
func WriteTargets(dir, job string, groups []TargetGroup) error {
	if groups == nil {
		groups = []TargetGroup{}
	}
	b, err := json.Marshal(groups)
	if err != nil {
		return err
	}
	p := filepath.Join(dir, job+".json")
	if err := os.WriteFile(p+".tmp", b, 0o644); err != nil {
		return fmt.Errorf("targets of %s: %w", job, err)
	}
	if err := os.Rename(p+".tmp", p); err != nil {
		return fmt.Errorf("targets of %s: %w", job, err)
	}
	return nil
}

// StartFlockPrometheus starts a Prometheus in dir with flock's own
// configuration from repoRoot: config/prometheus/scrape.yaml (as
// PrometheusConfig rewrites it, token the controller job's token file) and
// config/prometheus/alerts.yaml with every for: set to forDuration, so
// that an alert fires within a test's patience (the shipped durations are
// 5 to 15 minutes).
func StartFlockPrometheus(ctx context.Context, cacheRoot, repoRoot, dir, token, forDuration string) (*Prometheus, error) {
	scrape, err := os.ReadFile(filepath.Join(repoRoot, "config", "prometheus", "scrape.yaml"))
	if err != nil {
		return nil, err
	}
	rules, err := os.ReadFile(filepath.Join(repoRoot, "config", "prometheus", "alerts.yaml"))
	if err != nil {
		return nil, err
	}
	rules = regexp.MustCompile(`(?m)^(\s+for:) \S+$`).ReplaceAll(rules, []byte("$1 "+forDuration))
	rulesFile := filepath.Join(dir, "alerts.yaml")
	if err := os.WriteFile(rulesFile, rules, 0o644); err != nil {
		return nil, err
	}
	cfg, err := PrometheusConfig(scrape, dir, token, rulesFile)
	if err != nil {
		return nil, err
	}
	return StartPrometheus(ctx, cacheRoot, dir, cfg)
}

// Firing returns the value of label of each firing alert called name
// whose labels include where, sorted.
func Firing(alerts []Alert, name, label string, where map[string]string) []string {
	var out []string
	for _, a := range alerts {
		if a.Labels["alertname"] != name || a.State != "firing" {
			continue
		}
		match := true
		for k, v := range where {
			match = match && a.Labels[k] == v
		}
		if match {
			out = append(out, a.Labels[label])
		}
	}
	slices.Sort(out)
	return out
}
