// Package helm holds the tests of the Weir Helm chart (deploy/helm/weir): the chart is
// rendered with Helm's own Go SDK (what `helm template` runs) and linted with its linter
// (what `helm lint` runs), and every rendered object is decoded strictly against the
// Kubernetes API types of k8s.io/api, so a misspelt or misplaced field fails here rather
// than at `kubectl apply`.
package helm

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/releaseutil"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/json"
	"sigs.k8s.io/yaml"
)

const (
	chartDir    = "weir"
	prodValues  = "weir/examples/production.yaml"
	releaseName = "prod"
	namespace   = "streaming"
	// kubeVersion is the oldest Kubernetes the chart is for (Chart.yaml's kubeVersion:
	// StatefulSet ordinals and the pod-index label).
	kubeVersion = "v1.28.0"
)

// rendered is one rendering of the chart: its objects by kind and name.
type rendered struct {
	objs map[string]runtime.Object // "Kind/name"
	sm   []*unstructured.Unstructured
}

func (r *rendered) get(t *testing.T, kind, name string) runtime.Object {
	t.Helper()
	o, ok := r.objs[kind+"/"+name]
	if !ok {
		t.Fatalf("no %s %q rendered; have %v", kind, name, r.names())
	}
	return o
}

func (r *rendered) names() []string {
	var out []string
	for k := range r.objs {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func (r *rendered) statefulSets() []*appsv1.StatefulSet {
	var out []*appsv1.StatefulSet
	for _, k := range r.names() {
		if s, ok := r.objs[k].(*appsv1.StatefulSet); ok {
			out = append(out, s)
		}
	}
	return out
}

// scheme holds the API types the chart may render; anything else (but a ServiceMonitor)
// fails the test.
func newScheme(t *testing.T) *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{corev1.AddToScheme, appsv1.AddToScheme, policyv1.AddToScheme, storagev1.AddToScheme, batchv1.AddToScheme} {
		if err := add(s); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// readValues reads a values file (nil for "": the chart's defaults alone).
func readValues(t *testing.T, path string) map[string]any {
	t.Helper()
	if path == "" {
		return map[string]any{}
	}
	v, err := chartutil.ReadValuesFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return v.AsMap()
}

// renderChart renders the chart as `helm template` would, returning the manifests by
// template file.
func renderChart(t *testing.T, vals map[string]any) (map[string]string, error) {
	t.Helper()
	ch, err := loader.Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	c := *chartutil.DefaultCapabilities
	caps := &c
	kv, err := chartutil.ParseKubeVersion(kubeVersion)
	if err != nil {
		t.Fatal(err)
	}
	caps.KubeVersion = *kv
	if ch.Metadata.KubeVersion != "" && !chartutil.IsCompatibleRange(ch.Metadata.KubeVersion, kubeVersion) {
		t.Fatalf("chart's kubeVersion %q excludes %s", ch.Metadata.KubeVersion, kubeVersion)
	}
	rv, err := chartutil.ToRenderValues(ch, vals, chartutil.ReleaseOptions{Name: releaseName, Namespace: namespace, IsInstall: true, Revision: 1}, caps)
	if err != nil {
		t.Fatal(err)
	}
	return engine.Render(ch, rv)
}

// render renders the chart with the values file and decodes every object strictly.
func render(t *testing.T, valuesFile string) *rendered {
	t.Helper()
	files, err := renderChart(t, readValues(t, valuesFile))
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	return decodeFiles(t, files)
}

// decodeFiles decodes every rendered object strictly.
func decodeFiles(t *testing.T, files map[string]string) *rendered {
	t.Helper()
	scheme := newScheme(t)
	codec := json.NewSerializerWithOptions(json.DefaultMetaFactory, scheme, scheme, json.SerializerOptions{Yaml: true, Strict: true})
	r := &rendered{objs: map[string]runtime.Object{}}
	var fileNames []string
	for name := range files {
		fileNames = append(fileNames, name)
	}
	sort.Strings(fileNames)
	for _, file := range fileNames {
		if strings.HasSuffix(file, "NOTES.txt") {
			continue
		}
		for _, doc := range releaseutil.SplitManifests(files[file]) {
			if strings.TrimSpace(doc) == "" {
				continue
			}
			decodeDoc(t, codec, file, doc, r)
		}
	}
	if len(r.objs) == 0 {
		t.Fatal("nothing rendered")
	}
	return r
}

func decodeDoc(t *testing.T, codec runtime.Decoder, file, doc string, r *rendered) {
	t.Helper()
	var head struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}
	if err := yaml.Unmarshal([]byte(doc), &head); err != nil {
		t.Fatalf("%s: not YAML: %v\n%s", file, err, doc)
	}
	if head.Kind == "ServiceMonitor" {
		// Not in k8s.io/api (the Prometheus Operator's CRD): decoded as unstructured and
		// checked field by field in checkServiceMonitor.
		if head.APIVersion != "monitoring.coreos.com/v1" {
			t.Fatalf("%s: ServiceMonitor apiVersion %q", file, head.APIVersion)
		}
		u := &unstructured.Unstructured{}
		if err := yaml.UnmarshalStrict([]byte(doc), &u.Object); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		r.sm = append(r.sm, u)
		return
	}
	obj, gvk, err := codec.Decode([]byte(doc), nil, nil)
	if err != nil {
		// Strict mode: unknown and duplicate fields are errors too.
		t.Fatalf("%s: strict decoding against the Kubernetes API types: %v\n%s", file, err, doc)
	}
	name := obj.(interface{ GetName() string }).GetName()
	if name == "" {
		t.Fatalf("%s: %s without a name", file, gvk.Kind)
	}
	key := gvk.Kind + "/" + name
	if _, dup := r.objs[key]; dup {
		t.Fatalf("%s: %s rendered twice", file, key)
	}
	r.objs[key] = obj
}

func TestMain(m *testing.M) {
	code := m.Run()
	cleanupWeir()
	os.Exit(code)
}

// renderErr renders with values and returns the error, which must name want.
func renderErr(t *testing.T, vals map[string]any, want string) {
	t.Helper()
	_, err := renderChart(t, vals)
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("render: err %v, want one saying %q", err, want)
	}
}

// merge returns base with over's keys set (one level of nesting per map, recursively).
func merge(base, over map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range base {
		out[k] = v
	}
	for k, v := range over {
		if bm, ok := out[k].(map[string]any); ok {
			if om, ok := v.(map[string]any); ok {
				out[k] = merge(bm, om)
				continue
			}
		}
		out[k] = v
	}
	return out
}

func fatalIf(t *testing.T, cond bool, format string, args ...any) {
	t.Helper()
	if cond {
		t.Fatalf(format, args...)
	}
}

func exampleFiles(t *testing.T) []string {
	m, err := filepath.Glob("weir/examples/*.yaml")
	if err != nil || len(m) == 0 {
		t.Fatalf("no example values: %v", err)
	}
	return m
}
