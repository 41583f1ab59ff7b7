// Package compose holds deploy/compose's test: compose.yaml loaded by the Compose
// specification's Go loader (what `docker compose` itself uses), its Weir commands
// checked against the real binary's flags, and prometheus.yml against the services.
package compose

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/compose-spec/compose-go/v2/loader"
	"github.com/compose-spec/compose-go/v2/types"
	"gopkg.in/yaml.v3"
)

var (
	controllers = []string{"controller-1", "controller-2", "controller-3"}
	brokers     = map[string]string{"broker-a": "a", "broker-b": "b", "broker-c": "c"}
)

func loadProject(t *testing.T) *types.Project {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	wd, _ := os.Getwd()
	details, err := loader.LoadConfigFiles(ctx, []string{"compose.yaml"}, wd)
	if err != nil {
		t.Fatal(err)
	}
	details.Environment = types.Mapping{} // the file's defaults, not the test's environment
	p, err := loader.LoadWithContext(ctx, *details, func(o *loader.Options) { o.SetProjectName("weir", true) })
	if err != nil {
		t.Fatalf("compose loader: %v", err)
	}
	return p
}

// weirFlags builds cmd/weir and reads the flags `weir SUB --help` lists: name → takes a
// value (the help names a type after non-bool flags).
func weirFlags(t *testing.T) map[string]map[string]bool {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "weir")
	build := exec.Command("go", "build", "-o", bin, "./cmd/weir")
	build.Dir = filepath.Join("..", "..")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/weir: %v\n%s", err, out)
	}
	flags := map[string]map[string]bool{}
	for _, sub := range []string{"broker", "controller"} {
		out, _ := exec.Command(bin, sub, "--help").CombinedOutput() // flag's --help exits 0 or 2
		flags[sub] = map[string]bool{}
		sc := bufio.NewScanner(bytes.NewReader(out))
		for sc.Scan() {
			l := sc.Text()
			if !strings.HasPrefix(l, "  -") {
				continue
			}
			f := strings.Fields(l)
			flags[sub][strings.TrimPrefix(f[0], "-")] = len(f) > 1
		}
		if len(flags[sub]) < 10 {
			t.Fatalf("weir %s --help listed %d flags:\n%s", sub, len(flags[sub]), out)
		}
	}
	return flags
}

// parseArgs splits a weir command into its subcommand and flags, checking each flag
// against the subcommand's flag set (unknown flags and missing values fail).
func parseArgs(t *testing.T, svc string, cmd []string, known map[string]map[string]bool) (string, map[string]string) {
	t.Helper()
	if len(cmd) == 0 {
		t.Fatalf("%s: no command", svc)
	}
	sub, fs := cmd[0], known[cmd[0]]
	if fs == nil {
		t.Fatalf("%s: subcommand %q", svc, sub)
	}
	out := map[string]string{}
	for i := 1; i < len(cmd); i++ {
		a := cmd[i]
		name, val, hasVal := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !strings.HasPrefix(a, "-") {
			t.Errorf("%s: argument %q is not a flag", svc, a)
			continue
		}
		takesValue, ok := fs[name]
		if !ok {
			t.Errorf("%s: weir %s has no flag --%s", svc, sub, name)
			continue
		}
		if takesValue && !hasVal {
			if i+1 >= len(cmd) || strings.HasPrefix(cmd[i+1], "--") {
				t.Errorf("%s: --%s needs a value", svc, name)
				continue
			}
			i++
			val = cmd[i]
		}
		if _, dup := out[name]; dup {
			t.Errorf("%s: --%s given twice", svc, name)
		}
		out[name] = val
	}
	return sub, out
}

func TestComposeCluster(t *testing.T) {
	p := loadProject(t)
	known := weirFlags(t)

	for _, want := range []string{"volume-init", "minio", "minio-init", "prometheus", "grafana"} {
		if _, ok := p.Services[want]; !ok {
			t.Errorf("service %s missing", want)
		}
	}
	for _, v := range []string{"wal", "minio", "prometheus"} {
		if _, ok := p.Volumes[v]; !ok {
			t.Errorf("volume %s missing", v)
		}
	}

	// Controllers: ids 1..3, one --peers naming each controller service.
	var peers string
	apiAddrs := map[string]bool{}
	for i, name := range controllers {
		s, ok := p.Services[name]
		if !ok {
			t.Fatalf("service %s missing", name)
		}
		sub, f := parseArgs(t, name, s.Command, known)
		if sub != "controller" || f["node-id"] != fmt.Sprint(i+1) {
			t.Errorf("%s: weir %s --node-id %s", name, sub, f["node-id"])
		}
		if peers == "" {
			peers = f["peers"]
		} else if f["peers"] != peers {
			t.Errorf("%s: --peers %q differs from %q", name, f["peers"], peers)
		}
		checkDataVolume(t, p, s, f["data-dir"])
	}
	for _, e := range strings.Split(peers, ",") {
		id, addrs, _ := strings.Cut(e, "=")
		raft, api, _ := strings.Cut(addrs, "/")
		host := strings.Split(raft, ":")[0]
		if want := "controller-" + id; host != want || !strings.HasPrefix(api, want+":") {
			t.Errorf("--peers entry %q: want the hosts of service %s", e, want)
		}
		apiAddrs[api] = true
	}
	if len(apiAddrs) != 3 {
		t.Fatalf("--peers %q: want 3 controllers", peers)
	}

	// Brokers: a zone each, distinct ids, the shared WAL volume at --wal-root, every
	// controller API, every broker as a gossip seed, S3 on MinIO, time to drain.
	racks, ids := map[string]bool{}, map[string]bool{}
	for name, zone := range brokers {
		s, ok := p.Services[name]
		if !ok {
			t.Fatalf("service %s missing", name)
		}
		sub, f := parseArgs(t, name, s.Command, known)
		if sub != "broker" {
			t.Errorf("%s: weir %s", name, sub)
		}
		if f["rack"] != zone {
			t.Errorf("%s: --rack %q, want %q", name, f["rack"], zone)
		}
		racks[f["rack"]], ids[f["node-id"]] = true, true
		for _, c := range strings.Split(f["controllers"], ",") {
			if !apiAddrs[c] {
				t.Errorf("%s: --controllers names %s, not a controller API in --peers", name, c)
			}
		}
		if n := len(strings.Split(f["controllers"], ",")); n != 3 {
			t.Errorf("%s: --controllers names %d controllers", name, n)
		}
		if !mounts(s, "wal", f["wal-root"]) || f["wal-root"] == "" {
			t.Errorf("%s: --wal-root %q is not the shared volume wal", name, f["wal-root"])
		}
		checkDataVolume(t, p, s, f["data-dir"])
		if host := strings.Split(f["advertise"], ":")[0]; host != s.Hostname || host != name {
			t.Errorf("%s: --advertise %q: other containers reach it as %s", name, f["advertise"], name)
		}
		seeds := strings.Split(f["gossip-seeds"], ",")
		for b := range brokers {
			if !slices.Contains(seeds, b+":7946") {
				t.Errorf("%s: --gossip-seeds %q lacks %s", name, f["gossip-seeds"], b)
			}
		}
		if f["object-store"] != "s3" || f["s3-endpoint"] != "http://minio:9000" || f["s3-bucket"] == "" {
			t.Errorf("%s: object store %q %q %q, want s3 on MinIO", name, f["object-store"], f["s3-endpoint"], f["s3-bucket"])
		}
		if s.Environment["AWS_ACCESS_KEY_ID"] == nil || s.Environment["AWS_SECRET_ACCESS_KEY"] == nil {
			t.Errorf("%s: no S3 credentials in its environment", name)
		}
		drain, err := time.ParseDuration(f["drain-timeout"])
		if err != nil || s.StopGracePeriod == nil || time.Duration(*s.StopGracePeriod) <= drain {
			t.Errorf("%s: stop_grace_period %v must exceed --drain-timeout %q", name, s.StopGracePeriod, f["drain-timeout"])
		}
		if !strings.HasPrefix(f["metrics"], "0.0.0.0:") {
			t.Errorf("%s: --metrics %q is not reachable from Prometheus", name, f["metrics"])
		}
	}
	if len(racks) != 3 || len(ids) != 3 {
		t.Errorf("brokers: racks %v, ids %v: want 3 distinct of each", racks, ids)
	}

	// Every bind-mounted file (prometheus.yml, the rules, the dashboard) exists.
	for _, s := range p.Services {
		for _, v := range s.Volumes {
			if v.Type != types.VolumeTypeBind {
				continue
			}
			if _, err := os.Stat(v.Source); err != nil {
				t.Errorf("%s: bind mount %s: %v", s.Name, v.Source, err)
			}
		}
	}
	g := p.Services["grafana"]
	if !mounts(g, filepath.Join("..", "grafana", "weir-dashboard.json"), "") {
		t.Errorf("grafana does not mount deploy/grafana/weir-dashboard.json")
	}
	if !mounts(p.Services["prometheus"], filepath.Join("..", "alerts", "weir-alerts.yaml"), "") {
		t.Errorf("prometheus does not mount deploy/alerts/weir-alerts.yaml")
	}
}

// mounts: s mounts source (a volume name, or a path relative to this folder) at target
// ("" for any target).
func mounts(s types.ServiceConfig, source, target string) bool {
	abs, _ := filepath.Abs(source)
	for _, v := range s.Volumes {
		if (v.Source == source || v.Source == abs) && (target == "" || v.Target == target) {
			return true
		}
	}
	return false
}

// checkDataVolume: --data-dir lies on a named volume of the service's own (state
// survives a container's replacement; no two nodes share one).
func checkDataVolume(t *testing.T, p *types.Project, s types.ServiceConfig, dataDir string) {
	t.Helper()
	for _, v := range s.Volumes {
		if v.Type == types.VolumeTypeVolume && v.Source != "wal" && (dataDir == v.Target || strings.HasPrefix(dataDir, v.Target+"/")) {
			for _, o := range p.Services {
				if o.Name != s.Name && mounts(o, v.Source, "") && o.Name != "volume-init" {
					t.Errorf("%s: its data volume %s is also mounted by %s", s.Name, v.Source, o.Name)
				}
			}
			return
		}
	}
	t.Errorf("%s: --data-dir %q is on no named volume", s.Name, dataDir)
}

// TestPrometheusScrapesEveryNode: prometheus.yml has one target per Weir service, on
// its --metrics port, with a node label (the dashboard's and alerts' per-node series),
// brokers' node labels named as `weir dev` names them (broker-<id>).
func TestPrometheusScrapesEveryNode(t *testing.T) {
	p := loadProject(t)
	raw, err := os.ReadFile("prometheus.yml")
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		RuleFiles     []string `yaml:"rule_files"`
		ScrapeConfigs []struct {
			StaticConfigs []struct {
				Targets []string          `yaml:"targets"`
				Labels  map[string]string `yaml:"labels"`
			} `yaml:"static_configs"`
		} `yaml:"scrape_configs"`
	}
	if err := yaml.Unmarshal(raw, &cfg); err != nil {
		t.Fatal(err)
	}
	nodeOf := map[string]string{}
	for _, sc := range cfg.ScrapeConfigs {
		for _, st := range sc.StaticConfigs {
			for _, tg := range st.Targets {
				nodeOf[tg] = st.Labels["node"]
			}
		}
	}
	n := 0
	for _, s := range p.Services {
		if len(s.Command) == 0 || (s.Command[0] != "broker" && s.Command[0] != "controller") {
			continue
		}
		n++
		f := flagValues(s.Command)
		port := f["metrics"][strings.LastIndex(f["metrics"], ":")+1:]
		target := s.Name + ":" + port
		node, ok := nodeOf[target]
		if !ok {
			t.Errorf("%s: no scrape target %s", s.Name, target)
			continue
		}
		if want := s.Command[0] + "-" + f["node-id"]; node != want {
			t.Errorf("%s: node label %q, want %q", target, node, want)
		}
	}
	if n != 6 || len(nodeOf) != 6 {
		t.Errorf("%d Weir services, %d scrape targets: want 6 and 6", n, len(nodeOf))
	}
	if len(cfg.RuleFiles) == 0 || !mounts(p.Services["prometheus"], filepath.Join("..", "alerts", "weir-alerts.yaml"), filepath.Join(filepath.Dir(cfg.RuleFiles[0]), "weir-alerts.yaml")) {
		t.Errorf("rule_files %q do not match where the alerts are mounted", cfg.RuleFiles)
	}
}

// flagValues reads the flags of a command whose flag set TestComposeCluster checks.
func flagValues(cmd []string) map[string]string {
	out := map[string]string{}
	for i := 1; i+1 < len(cmd); i++ {
		if strings.HasPrefix(cmd[i], "--") && !strings.HasPrefix(cmd[i+1], "--") {
			out[strings.TrimPrefix(cmd[i], "--")] = cmd[i+1]
			i++
		}
	}
	return out
}
