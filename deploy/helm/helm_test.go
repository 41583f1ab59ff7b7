package helm

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
)

// want is what a rendering must hold, from the values it was rendered with.
type want struct {
	fullname      string
	controllers   int
	zones         []string
	brokersInZone int
	drain         time.Duration
	walMode       string // storageClass or nfs
	s3            bool
	tls, sasl     bool
	token         bool
	monitor       bool
}

var (
	wantDefault = want{fullname: "prod-weir", controllers: 3, zones: []string{"us-east-1a", "us-east-1b", "us-east-1c"},
		brokersInZone: 1, drain: 60 * time.Second, walMode: "storageClass"}
	wantProduction = want{fullname: "prod-weir", controllers: 3, zones: []string{"us-east-1a", "us-east-1b", "us-east-1c"},
		brokersInZone: 2, drain: 120 * time.Second, walMode: "nfs", s3: true, tls: true, sasl: true, token: true, monitor: true}
)

func TestChartDefaultValues(t *testing.T) {
	checkCluster(t, render(t, ""), wantDefault)
}

func TestChartProductionExample(t *testing.T) {
	checkCluster(t, render(t, prodValues), wantProduction)
}

// TestChartLint runs Helm's linter (`helm lint`, strict: warnings fail too) with the
// default values and every example.
func TestChartLint(t *testing.T) {
	kv, err := chartutil.ParseKubeVersion(kubeVersion)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range append([]string{""}, exampleFiles(t)...) {
		l := lint.AllWithKubeVersion(chartDir, readValues(t, f), namespace, kv)
		for _, m := range l.Messages {
			if m.Severity >= support.WarningSev {
				t.Errorf("helm lint (values %q): %s", f, m)
			}
		}
	}
}

// TestChartRefusesUnsafeValues: values that would start a cluster that cannot work, or
// that leaks the cluster token, fail the rendering with a message saying why.
func TestChartRefusesUnsafeValues(t *testing.T) {
	for _, c := range []struct {
		name string
		vals map[string]any
		want string
	}{
		{"token in the clear", map[string]any{"clusterToken": map[string]any{"secretName": "tok"}}, "in the clear"},
		{"nfs without server", map[string]any{"wal": map[string]any{"mode": "nfs"}}, "wal.nfs.server"},
		{"unknown wal mode", map[string]any{"wal": map[string]any{"mode": "hostPath"}}, "wal.mode must be"},
		{"no zones", map[string]any{"broker": map[string]any{"zones": []any{}}}, "at least one zone"},
		{"kafka tls without secret", map[string]any{"tls": map[string]any{"kafka": map[string]any{"enabled": true}}}, "tls.kafka.secretName"},
	} {
		t.Run(c.name, func(t *testing.T) { renderErr(t, c.vals, c.want) })
	}
	// allowPlaintext is the explicit way out, and it reaches the flag.
	r := renderVals(t, map[string]any{"clusterToken": map[string]any{"secretName": "tok", "allowPlaintext": true}})
	for _, s := range r.statefulSets() {
		c := s.Spec.Template.Spec.Containers[0]
		if !hasArg(c, "--insecure-plaintext-token") || argValue(c, "--cluster-token-file") != "/etc/weir/token/token" {
			t.Errorf("%s: token flags %v", s.Name, c.Args)
		}
	}
}

// TestChartZoneOrderKeepsIDs: a zone's broker IDs come from its idBase, so listing an
// explicit idBase keeps IDs when zones are reordered (the README says never to change them).
func TestChartZoneOrderKeepsIDs(t *testing.T) {
	r := renderVals(t, map[string]any{"broker": map[string]any{"zones": []any{
		map[string]any{"name": "eu-west-1b", "replicas": 2, "idBase": 200},
		map[string]any{"name": "eu-west-1a", "replicas": 3, "idBase": 100},
	}}})
	ids := brokerIDs(t, r)
	if got, want := fmt.Sprint(ids["eu-west-1a"]), "[100 101 102]"; got != want {
		t.Errorf("eu-west-1a IDs %s, want %s", got, want)
	}
	if got, want := fmt.Sprint(ids["eu-west-1b"]), "[200 201]"; got != want {
		t.Errorf("eu-west-1b IDs %s, want %s", got, want)
	}
}

func renderVals(t *testing.T, vals map[string]any) *rendered {
	t.Helper()
	files, err := renderChart(t, vals)
	if err != nil {
		t.Fatal(err)
	}
	return decodeFiles(t, files)
}

func checkCluster(t *testing.T, r *rendered, w want) {
	t.Helper()
	checkControllers(t, r, w)
	checkBrokers(t, r, w)
	checkWAL(t, r, w)
	checkPDBs(t, r, w)
	checkServiceMonitor(t, r, w)
	checkJobs(t, r, w)
}

func checkControllers(t *testing.T, r *rendered, w want) {
	name := w.fullname + "-controller"
	s := r.get(t, "StatefulSet", name).(*appsv1.StatefulSet)
	fatalIf(t, s.Spec.Replicas == nil || int(*s.Spec.Replicas) != w.controllers, "controller replicas %v", s.Spec.Replicas)
	fatalIf(t, s.Spec.Ordinals == nil || s.Spec.Ordinals.Start != 1, "controller ordinals %+v: IDs must be 1..n", s.Spec.Ordinals)
	if s.Spec.PodManagementPolicy != appsv1.ParallelPodManagement {
		t.Errorf("controllers %s: a new quorum needs its members started together", s.Spec.PodManagementPolicy)
	}
	pod := s.Spec.Template.Spec
	checkSelector(t, s)
	// Anti-affinity: never two controllers on one node.
	aa := pod.Affinity.PodAntiAffinity
	fatalIf(t, aa == nil || len(aa.RequiredDuringSchedulingIgnoredDuringExecution) == 0, "controllers without required anti-affinity")
	term := aa.RequiredDuringSchedulingIgnoredDuringExecution[0]
	if term.TopologyKey != "kubernetes.io/hostname" || !selects(t, term.LabelSelector, s.Spec.Template.Labels) {
		t.Errorf("controller anti-affinity %+v does not keep controllers on separate nodes", term)
	}
	if !slices.ContainsFunc(pod.TopologySpreadConstraints, func(c corev1.TopologySpreadConstraint) bool {
		return c.TopologyKey == "topology.kubernetes.io/zone" && selects(t, c.LabelSelector, s.Spec.Template.Labels)
	}) {
		t.Error("controllers not spread over zones")
	}
	// The Raft data on a PVC of its own.
	fatalIf(t, len(s.Spec.VolumeClaimTemplates) != 1, "controller volume claims %d", len(s.Spec.VolumeClaimTemplates))
	vct := s.Spec.VolumeClaimTemplates[0]
	if !slices.Equal(vct.Spec.AccessModes, []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}) {
		t.Errorf("controller data access modes %v", vct.Spec.AccessModes)
	}
	c := pod.Containers[0]
	checkArgs(t, name, c)
	if m := mountOf(c, vct.Name); m == nil || argValue(c, "--data-dir") != m.MountPath {
		t.Errorf("controller --data-dir %q is not its volume claim's mount", argValue(c, "--data-dir"))
	}
	// --peers: IDs 1..n, each the pod DNS name of that ordinal under the governing Service.
	headless := r.get(t, "Service", s.Spec.ServiceName).(*corev1.Service)
	checkHeadless(t, headless, s.Spec.Template.Labels)
	raftPort, apiPort := port(t, c, "raft"), port(t, c, "api")
	var peers, apis []string
	for id := 1; id <= w.controllers; id++ {
		host := fmt.Sprintf("%s-%d.%s.%s.svc.cluster.local", name, id, s.Spec.ServiceName, namespace)
		peers = append(peers, fmt.Sprintf("%d=%s:%d/%s:%d", id, host, raftPort, host, apiPort))
		apis = append(apis, fmt.Sprintf("%s:%d", host, apiPort))
	}
	if got := argValue(c, "--peers"); got != strings.Join(peers, ",") {
		t.Errorf("--peers\n got %s\nwant %s", got, strings.Join(peers, ","))
	}
	if argValue(c, "--raft-addr") != fmt.Sprintf("0.0.0.0:%d", raftPort) || argValue(c, "--api-addr") != fmt.Sprintf("0.0.0.0:%d", apiPort) {
		t.Errorf("controller binds %s %s", argValue(c, "--raft-addr"), argValue(c, "--api-addr"))
	}
	checkNodeIDFromPodIndex(t, name, c)
	checkProbes(t, name, c)
	// Brokers reach every controller.
	for _, b := range brokerSets(r) {
		if got := argValue(b.Spec.Template.Spec.Containers[0], "--controllers"); got != strings.Join(apis, ",") {
			t.Errorf("%s --controllers %s, want %s", b.Name, got, strings.Join(apis, ","))
		}
	}
	if w.tls && !hasArg(c, "--raft-tls") {
		t.Error("controller TLS without --raft-tls")
	}
}

func brokerSets(r *rendered) []*appsv1.StatefulSet {
	var out []*appsv1.StatefulSet
	for _, s := range r.statefulSets() {
		if s.Spec.Template.Labels["app.kubernetes.io/component"] == "broker" {
			out = append(out, s)
		}
	}
	return out
}

// brokerIDs: each zone's broker IDs (the pod indexes of its StatefulSet).
func brokerIDs(t *testing.T, r *rendered) map[string][]int {
	out := map[string][]int{}
	for _, s := range brokerSets(r) {
		zone := argValue(s.Spec.Template.Spec.Containers[0], "--rack")
		fatalIf(t, s.Spec.Ordinals == nil, "%s without ordinals: broker IDs would collide across zones", s.Name)
		for i := 0; i < int(*s.Spec.Replicas); i++ {
			out[zone] = append(out[zone], int(s.Spec.Ordinals.Start)+i)
		}
	}
	return out
}

func checkBrokers(t *testing.T, r *rendered, w want) {
	sets := brokerSets(r)
	fatalIf(t, len(sets) != len(w.zones), "%d broker StatefulSets for %d zones", len(sets), len(w.zones))
	seen := map[int]string{}
	for zone, ids := range brokerIDs(t, r) {
		fatalIf(t, len(ids) != w.brokersInZone, "zone %s: %d brokers, want %d", zone, len(ids), w.brokersInZone)
		for _, id := range ids {
			if z, dup := seen[id]; dup {
				t.Errorf("broker ID %d in zones %s and %s", id, z, zone)
			}
			seen[id] = zone
		}
	}
	headlessName := sets[0].Spec.ServiceName
	headless := r.get(t, "Service", headlessName).(*corev1.Service)
	for i, s := range sets {
		pod := s.Spec.Template.Spec
		c := pod.Containers[0]
		checkSelector(t, s)
		checkArgs(t, s.Name, c)
		zone := argValue(c, "--rack")
		if !slices.Contains(w.zones, zone) {
			t.Fatalf("%s: --rack %q is not one of the zones %v", s.Name, zone, w.zones)
		}
		// Pinned to its zone: required node affinity on the node's zone label, so the rack
		// given is the zone of the node it runs on.
		na := pod.Affinity.NodeAffinity
		fatalIf(t, na == nil || na.RequiredDuringSchedulingIgnoredDuringExecution == nil, "%s: no required node affinity", s.Name)
		terms := na.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
		if len(terms) != 1 || len(terms[0].MatchExpressions) != 1 {
			t.Fatalf("%s: node affinity %+v", s.Name, terms)
		}
		e := terms[0].MatchExpressions[0]
		if e.Key != "topology.kubernetes.io/zone" || e.Operator != corev1.NodeSelectorOpIn || !slices.Equal(e.Values, []string{zone}) {
			t.Errorf("%s: node affinity %+v does not pin it to %s", s.Name, e, zone)
		}
		aa := pod.Affinity.PodAntiAffinity
		if aa == nil || len(aa.RequiredDuringSchedulingIgnoredDuringExecution)+len(aa.PreferredDuringSchedulingIgnoredDuringExecution) == 0 {
			t.Errorf("%s: no anti-affinity between brokers", s.Name)
		} else if len(aa.RequiredDuringSchedulingIgnoredDuringExecution) > 0 {
			term := aa.RequiredDuringSchedulingIgnoredDuringExecution[0]
			if term.TopologyKey != "kubernetes.io/hostname" || !selects(t, term.LabelSelector, s.Spec.Template.Labels) {
				t.Errorf("%s: anti-affinity %+v", s.Name, term)
			}
		}
		if s.Spec.ServiceName != headlessName {
			t.Errorf("%s: governing Service %s, others %s", s.Name, s.Spec.ServiceName, headlessName)
		}
		checkNodeIDFromPodIndex(t, s.Name, c)
		checkProbes(t, s.Name, c)
		// Advertised: the pod's DNS name under the headless Service.
		domain := fmt.Sprintf(".%s.%s.svc.cluster.local", headlessName, namespace)
		kafkaPort := port(t, c, "kafka")
		if got, want := argValue(c, "--advertise"), fmt.Sprintf("$(WEIR_POD_NAME)%s:%d", domain, kafkaPort); got != want {
			t.Errorf("%s: --advertise %s, want %s", s.Name, got, want)
		}
		if envField(c, "WEIR_POD_NAME") != "metadata.name" || envField(c, "WEIR_POD_IP") != "status.podIP" {
			t.Errorf("%s: pod name/IP env", s.Name)
		}
		// Zone listeners: one per zone on every broker, advertised as this pod, and a
		// per-zone Service with that zone's brokers on that zone's listener.
		zl := argValues(c, "--zone-listener")
		fatalIf(t, len(zl) != len(w.zones), "%s: %d zone listeners for %d zones", s.Name, len(zl), len(w.zones))
		proto := argValue(c, "--listen-protocol")
		for j, z := range w.zones {
			p := port(t, c, fmt.Sprintf("zone-%d", j))
			want := fmt.Sprintf("%s=%s://0.0.0.0:%d/$(WEIR_POD_NAME)%s:%d", z, proto, p, domain, p)
			if !slices.Contains(zl, want) {
				t.Errorf("%s: no zone listener %s in %v", s.Name, want, zl)
			}
			if z != zone {
				continue
			}
			svc := r.get(t, "Service", fmt.Sprintf("%s-kafka-%s", w.fullname, z)).(*corev1.Service)
			if !labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(s.Spec.Template.Labels)) {
				t.Errorf("Service %s does not select %s", svc.Name, s.Name)
			}
			for _, other := range sets {
				if other != s && labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(other.Spec.Template.Labels)) {
					t.Errorf("Service %s of zone %s also selects %s", svc.Name, z, other.Name)
				}
			}
			if !slices.ContainsFunc(svc.Spec.Ports, func(sp corev1.ServicePort) bool {
				return int(sp.Port) == p && sp.TargetPort.StrVal == fmt.Sprintf("zone-%d", j)
			}) {
				t.Errorf("Service %s lacks zone %s's listener port %d: %+v", svc.Name, z, p, svc.Spec.Ports)
			}
		}
		if w.tls && proto != "SASL_SSL" && w.sasl {
			t.Errorf("%s: TLS and SASL but --listen-protocol %s", s.Name, proto)
		}
		if w.tls && argValue(c, "--peer-tls-ca") == "" {
			t.Errorf("%s: TLS listeners but no --peer-tls-ca (broker links would be refused)", s.Name)
		}
		// Gossip: advertised by IP, seeded with the first broker of every zone.
		if argValue(c, "--gossip-advertise-addr") != fmt.Sprintf("$(WEIR_POD_IP):%d", port(t, c, "gossip-tcp")) {
			t.Errorf("%s: --gossip-advertise-addr %s", s.Name, argValue(c, "--gossip-advertise-addr"))
		}
		if seeds := strings.Split(argValue(c, "--gossip-seeds"), ","); len(seeds) != len(w.zones) {
			t.Errorf("%s: gossip seeds %v", s.Name, seeds)
		}
		// Drain: SIGTERM drains for --drain-timeout; the grace period holds the preStop
		// sleep and the drain with time to spare.
		d, err := time.ParseDuration(argValue(c, "--drain-timeout"))
		fatalIf(t, err != nil, "%s: --drain-timeout: %v", s.Name, err)
		if d != w.drain {
			t.Errorf("%s: --drain-timeout %s, want %s", s.Name, d, w.drain)
		}
		var sleep time.Duration
		if c.Lifecycle == nil || c.Lifecycle.PreStop == nil || c.Lifecycle.PreStop.Sleep == nil {
			t.Errorf("%s: no preStop sleep", s.Name)
		} else {
			sleep = time.Duration(c.Lifecycle.PreStop.Sleep.Seconds) * time.Second
		}
		grace := time.Duration(*pod.TerminationGracePeriodSeconds) * time.Second
		if grace < sleep+d+5*time.Second {
			t.Errorf("%s: terminationGracePeriodSeconds %s < preStop %s + drain %s + 5s: Kubernetes would kill the drain", s.Name, grace, sleep, d)
		}
		// The shared WAL root on the RWX claim; the object store.
		if m := mountOf(c, "wal"); m == nil || argValue(c, "--wal-root") != m.MountPath {
			t.Errorf("%s: --wal-root %q is not the wal volume's mount", s.Name, argValue(c, "--wal-root"))
		}
		if w.s3 != (argValue(c, "--object-store") == "s3") || (w.s3 && argValue(c, "--s3-bucket") == "") {
			t.Errorf("%s: object store %s bucket %q", s.Name, argValue(c, "--object-store"), argValue(c, "--s3-bucket"))
		}
		if w.token && !strings.HasPrefix(argValue(c, "--cluster-token-file"), "/etc/weir/token/") {
			t.Errorf("%s: no cluster token", s.Name)
		}
		if w.token && mountOf(c, "token") == nil {
			t.Errorf("%s: token volume not mounted", s.Name)
		}
		checkVolumes(t, s.Name, pod)
		if i == 0 {
			checkHeadless(t, headless, nil)
		}
		if !labels.SelectorFromSet(headless.Spec.Selector).Matches(labels.Set(s.Spec.Template.Labels)) {
			t.Errorf("headless Service %s does not select %s", headless.Name, s.Name)
		}
	}
	boot := r.get(t, "Service", w.fullname+"-kafka").(*corev1.Service)
	for _, s := range sets {
		if !labels.SelectorFromSet(boot.Spec.Selector).Matches(labels.Set(s.Spec.Template.Labels)) {
			t.Errorf("bootstrap Service does not select %s", s.Name)
		}
	}
}

// checkWAL: one ReadWriteMany claim every broker mounts, whose volume (a static NFS PV or
// the StorageClass that provisions it) is mounted with the options the fence needs.
func checkWAL(t *testing.T, r *rendered, w want) {
	claim := ""
	for _, s := range brokerSets(r) {
		for _, v := range s.Spec.Template.Spec.Volumes {
			if v.Name == "wal" {
				fatalIf(t, v.PersistentVolumeClaim == nil, "%s: wal volume is not a claim", s.Name)
				if claim != "" && claim != v.PersistentVolumeClaim.ClaimName {
					t.Errorf("brokers mount different WAL claims %s and %s", claim, v.PersistentVolumeClaim.ClaimName)
				}
				claim = v.PersistentVolumeClaim.ClaimName
			}
		}
	}
	pvc := r.get(t, "PersistentVolumeClaim", claim).(*corev1.PersistentVolumeClaim)
	if !slices.Equal(pvc.Spec.AccessModes, []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}) {
		t.Errorf("WAL claim access modes %v, want ReadWriteMany", pvc.Spec.AccessModes)
	}
	if pvc.Annotations["helm.sh/resource-policy"] != "keep" {
		t.Error("WAL claim would be deleted with the release")
	}
	var opts []string
	switch w.walMode {
	case "nfs":
		pv := r.get(t, "PersistentVolume", pvc.Spec.VolumeName).(*corev1.PersistentVolume)
		fatalIf(t, pv.Spec.NFS == nil || pv.Spec.NFS.Server == "", "WAL PV is not NFS: %+v", pv.Spec.PersistentVolumeSource)
		if !slices.Equal(pv.Spec.AccessModes, []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}) || pv.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimRetain {
			t.Errorf("WAL PV modes %v reclaim %s", pv.Spec.AccessModes, pv.Spec.PersistentVolumeReclaimPolicy)
		}
		if pvc.Spec.StorageClassName == nil || *pvc.Spec.StorageClassName != "" {
			t.Error("WAL claim of a static PV must have storageClassName \"\" (else a default class provisions another volume)")
		}
		opts = pv.Spec.MountOptions
	default:
		fatalIf(t, pvc.Spec.StorageClassName == nil, "WAL claim without a storage class")
		sc := r.get(t, "StorageClass", *pvc.Spec.StorageClassName).(*storagev1.StorageClass)
		opts = sc.MountOptions
	}
	checkMountOptions(t, opts)
}

// checkMountOptions: what internal/mountcheck requires of the WAL root's NFS mount.
func checkMountOptions(t *testing.T, opts []string) {
	t.Helper()
	has := func(o string) bool { return slices.Contains(opts, o) }
	if !has("nfsvers=4.1") && !has("vers=4.1") {
		t.Errorf("WAL mount options %v: NFS 4.1 (below v4 the fence's in-place overwrite may go unseen)", opts)
	}
	if !has("lookupcache=positive") && !has("lookupcache=none") {
		t.Errorf("WAL mount options %v: lookupcache=positive (the default caches negative lookups: a SEAL may stay hidden)", opts)
	}
	if !has("hard") || has("soft") || has("nocto") {
		t.Errorf("WAL mount options %v: hard, never soft or nocto", opts)
	}
}

func checkPDBs(t *testing.T, r *rendered, w want) {
	for _, c := range []struct{ pdb, component string }{{w.fullname + "-controller", "controller"}, {w.fullname + "-broker", "broker"}} {
		p := r.get(t, "PodDisruptionBudget", c.pdb).(*policyv1.PodDisruptionBudget)
		if p.Spec.MaxUnavailable == nil || p.Spec.MaxUnavailable.IntValue() != 1 {
			t.Errorf("PDB %s maxUnavailable %v", p.Name, p.Spec.MaxUnavailable)
		}
		n := 0
		for _, s := range r.statefulSets() {
			if selects(t, p.Spec.Selector, s.Spec.Template.Labels) {
				n++
				if s.Spec.Template.Labels["app.kubernetes.io/component"] != c.component {
					t.Errorf("PDB %s selects %s", p.Name, s.Name)
				}
			}
		}
		if n == 0 {
			t.Errorf("PDB %s selects no pods", p.Name)
		}
	}
}

// checkServiceMonitor: decoded as unstructured (its CRD is not in k8s.io/api), so each
// field is checked here: it selects the Services that expose a metrics port of every
// controller and broker, and labels each target with node.
func checkServiceMonitor(t *testing.T, r *rendered, w want) {
	if !w.monitor {
		fatalIf(t, len(r.sm) != 0, "ServiceMonitor rendered while disabled")
		return
	}
	fatalIf(t, len(r.sm) != 1, "%d ServiceMonitors", len(r.sm))
	sm := r.sm[0]
	for _, f := range [][]string{{"metadata", "name"}, {"spec", "selector", "matchLabels"}, {"spec", "endpoints"}} {
		if _, ok, _ := unstructured.NestedFieldNoCopy(sm.Object, f...); !ok {
			t.Fatalf("ServiceMonitor lacks %s", strings.Join(f, "."))
		}
	}
	for k := range sm.Object["spec"].(map[string]any) {
		if !slices.Contains([]string{"selector", "namespaceSelector", "endpoints"}, k) {
			t.Errorf("ServiceMonitor spec.%s: not a field the chart means to set", k)
		}
	}
	ml, _, _ := unstructured.NestedStringMap(sm.Object, "spec", "selector", "matchLabels")
	eps, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
	fatalIf(t, len(eps) != 1, "ServiceMonitor endpoints %v", eps)
	ep := eps[0].(map[string]any)
	for k := range ep {
		if !slices.Contains([]string{"port", "path", "interval", "relabelings"}, k) {
			t.Errorf("ServiceMonitor endpoint field %q unknown", k)
		}
	}
	if ep["path"] != "/metrics" {
		t.Errorf("ServiceMonitor path %v", ep["path"])
	}
	if _, err := time.ParseDuration(fmt.Sprint(ep["interval"])); err != nil {
		t.Errorf("ServiceMonitor interval: %v", err)
	}
	nodeLabel := false
	for _, rl := range ep["relabelings"].([]any) {
		m := rl.(map[string]any)
		if m["targetLabel"] == "node" && fmt.Sprint(m["sourceLabels"]) == "[__meta_kubernetes_pod_name]" {
			nodeLabel = true
		}
	}
	if !nodeLabel {
		t.Error("ServiceMonitor does not label targets with node (the dashboard's and alerts' label)")
	}
	// Every controller and broker is behind a selected Service with the endpoint's port.
	for _, s := range r.statefulSets() {
		found := false
		for _, k := range r.names() {
			svc, ok := r.objs[k].(*corev1.Service)
			if !ok || !labels.SelectorFromSet(ml).Matches(labels.Set(svc.Labels)) {
				continue
			}
			if labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(s.Spec.Template.Labels)) &&
				slices.ContainsFunc(svc.Spec.Ports, func(p corev1.ServicePort) bool { return p.Name == ep["port"] }) {
				found = true
			}
		}
		if !found {
			t.Errorf("ServiceMonitor scrapes no Service of %s", s.Name)
		}
	}
}

// checkJobs: the SASL users Job runs weir admin user set per user from its Secret.
func checkJobs(t *testing.T, r *rendered, w want) {
	k := "Job/" + w.fullname + "-sasl-users"
	o, ok := r.objs[k]
	if !w.sasl {
		fatalIf(t, ok, "SASL users Job without SASL")
		return
	}
	fatalIf(t, !ok, "no SASL users Job")
	j := o.(*batchv1.Job)
	for _, c := range j.Spec.Template.Spec.Containers {
		checkArgs(t, j.Name, c)
		if m := mountOf(c, strings.Replace(c.Name, "user-", "password-", 1)); m == nil || !strings.HasPrefix(argValue(c, "--password-file"), m.MountPath+"/") {
			t.Errorf("%s/%s: --password-file %q not in its Secret's mount", j.Name, c.Name, argValue(c, "--password-file"))
		}
	}
	checkVolumes(t, j.Name, j.Spec.Template.Spec)
}

func checkSelector(t *testing.T, s *appsv1.StatefulSet) {
	t.Helper()
	if !selects(t, s.Spec.Selector, s.Spec.Template.Labels) {
		t.Errorf("%s: selector does not match its pods", s.Name)
	}
}

func checkHeadless(t *testing.T, svc *corev1.Service, podLabels map[string]string) {
	t.Helper()
	if svc.Spec.ClusterIP != corev1.ClusterIPNone || !svc.Spec.PublishNotReadyAddresses {
		t.Errorf("Service %s: clusterIP %q publishNotReadyAddresses %v: pods must resolve before they are ready", svc.Name, svc.Spec.ClusterIP, svc.Spec.PublishNotReadyAddresses)
	}
	if podLabels != nil && !labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(podLabels)) {
		t.Errorf("Service %s does not select its pods", svc.Name)
	}
}

// checkNodeIDFromPodIndex: --node-id is the StatefulSet's pod index (downward API).
func checkNodeIDFromPodIndex(t *testing.T, where string, c corev1.Container) {
	t.Helper()
	if argValue(c, "--node-id") != "$(WEIR_NODE_ID)" || envField(c, "WEIR_NODE_ID") != "metadata.labels['apps.kubernetes.io/pod-index']" {
		t.Errorf("%s: --node-id %q is not the pod index", where, argValue(c, "--node-id"))
	}
}

// checkProbes: liveness on /healthz and readiness on /readyz, on the port --metrics binds.
func checkProbes(t *testing.T, where string, c corev1.Container) {
	t.Helper()
	metrics := argValue(c, "--metrics")
	if metrics != fmt.Sprintf("0.0.0.0:%d", port(t, c, "metrics")) {
		t.Errorf("%s: --metrics %q is not the metrics port on every interface", where, metrics)
	}
	for _, p := range []struct {
		name  string
		probe *corev1.Probe
		path  string
	}{{"liveness", c.LivenessProbe, "/healthz"}, {"readiness", c.ReadinessProbe, "/readyz"}, {"startup", c.StartupProbe, "/healthz"}} {
		if p.probe == nil || p.probe.HTTPGet == nil {
			t.Errorf("%s: no HTTP %s probe", where, p.name)
			continue
		}
		if p.probe.HTTPGet.Path != p.path || p.probe.HTTPGet.Port.StrVal != "metrics" {
			t.Errorf("%s: %s probe %s on %s, want %s on metrics", where, p.name, p.probe.HTTPGet.Path, p.probe.HTTPGet.Port.String(), p.path)
		}
	}
}

// checkVolumes: every mount names a volume of the pod, and every file flag points into a
// mount.
func checkVolumes(t *testing.T, where string, pod corev1.PodSpec) {
	t.Helper()
	vols := map[string]bool{}
	for _, v := range pod.Volumes {
		vols[v.Name] = true
	}
	for _, c := range pod.Containers {
		for _, m := range c.VolumeMounts {
			if !vols[m.Name] {
				t.Errorf("%s/%s mounts unknown volume %s", where, c.Name, m.Name)
			}
		}
		for _, a := range c.Args {
			_, v, _ := strings.Cut(a, "=")
			if !strings.HasPrefix(v, "/etc/weir/") {
				continue
			}
			in := false
			for _, m := range c.VolumeMounts {
				if strings.HasPrefix(v, m.MountPath+"/") {
					in = true
				}
			}
			if !in {
				t.Errorf("%s/%s: %s points outside every mount", where, c.Name, a)
			}
		}
	}
}

func selects(t *testing.T, sel *metav1.LabelSelector, podLabels map[string]string) bool {
	t.Helper()
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		t.Fatal(err)
	}
	return !s.Empty() && s.Matches(labels.Set(podLabels))
}

func mountOf(c corev1.Container, volume string) *corev1.VolumeMount {
	for i := range c.VolumeMounts {
		if c.VolumeMounts[i].Name == volume {
			return &c.VolumeMounts[i]
		}
	}
	return nil
}

func port(t *testing.T, c corev1.Container, name string) int {
	t.Helper()
	for _, p := range c.Ports {
		if p.Name == name {
			return int(p.ContainerPort)
		}
	}
	t.Fatalf("container %s has no port %s", c.Name, name)
	return 0
}

func envField(c corev1.Container, name string) string {
	for _, e := range c.Env {
		if e.Name == name && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil {
			return e.ValueFrom.FieldRef.FieldPath
		}
	}
	return ""
}

func argValues(c corev1.Container, flag string) []string {
	var out []string
	for _, a := range c.Args {
		if v, ok := strings.CutPrefix(a, flag+"="); ok {
			out = append(out, v)
		}
	}
	return out
}

func argValue(c corev1.Container, flag string) string {
	v := argValues(c, flag)
	if len(v) == 0 {
		return ""
	}
	return v[len(v)-1]
}

func hasArg(c corev1.Container, flag string) bool { return slices.Contains(c.Args, flag) }
