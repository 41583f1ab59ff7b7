// Package terraform tests the Terraform module (deploy/terraform/modules/weir) and its
// example without a provider: the providers cannot be downloaded here, so `terraform init`
// and `validate` cannot run. What runs instead: `terraform fmt -check`, and HCL's own
// parser (hashicorp/hcl, what Terraform is built on) over every file, with checks that the
// module has the variables and outputs the Helm chart needs, that the example wires them,
// that its security groups open the chart's ports only, and that the brokers' IAM policy
// grants exactly the S3 actions objectstore/s3 calls.
package terraform

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclparse"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/hashicorp/hcl/v2/hclwrite"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/function"
	"github.com/zclconf/go-cty/cty/function/stdlib"
	"sigs.k8s.io/yaml"
)

const (
	moduleDir  = "modules/weir"
	exampleDir = "examples/eks"
	chartDir   = "../helm/weir"
	s3Source   = "../../objectstore/s3/s3.go"
)

// TestTerraformFmt: `terraform fmt -check -recursive` (the only terraform command that
// needs no provider). Skipped without the binary unless WEIR_REQUIRE_TERRAFORM=1.
func TestTerraformFmt(t *testing.T) {
	bin, err := exec.LookPath("terraform")
	if err != nil {
		if os.Getenv("WEIR_REQUIRE_TERRAFORM") == "1" {
			t.Fatal("terraform not found and WEIR_REQUIRE_TERRAFORM=1")
		}
		t.Skip("terraform not installed")
	}
	cmd := exec.Command(bin, "fmt", "-check", "-recursive", "-diff", ".")
	cmd.Env = append(os.Environ(), "TF_CLI_CONFIG_FILE=/dev/null", "CHECKPOINT_DISABLE=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("terraform fmt -check: %v\n%s", err, out)
	}
}

// TestHCLFormat holds every file to hclwrite.Format, the canonical layout `terraform fmt`
// applies, so the formatting is checked where terraform is not installed too.
func TestHCLFormat(t *testing.T) {
	var files []string
	err := filepath.WalkDir(".", func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && (strings.HasSuffix(path, ".tf") || strings.HasSuffix(path, ".tfvars")) {
			files = append(files, path)
		}
		return err
	})
	if err != nil || len(files) == 0 {
		t.Fatalf("no Terraform files: %v", err)
	}
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if got := hclwrite.Format(src); !bytes.Equal(got, src) {
			t.Errorf("%s is not formatted (terraform fmt %s)", f, f)
		}
	}
}

// config is one directory's HCL: its top-level blocks by type.
type config struct {
	blocks []*hclsyntax.Block
}

func parseDir(t *testing.T, dir string) *config {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.tf"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no .tf files in %s: %v", dir, err)
	}
	p := hclparse.NewParser()
	c := &config{}
	for _, f := range files {
		file, diags := p.ParseHCLFile(f)
		if diags.HasErrors() {
			t.Fatalf("%s: %s", f, diags.Error())
		}
		c.blocks = append(c.blocks, file.Body.(*hclsyntax.Body).Blocks...)
	}
	return c
}

// named returns the blocks of a type, by their labels joined with ".".
func (c *config) named(typ string) map[string]*hclsyntax.Block {
	out := map[string]*hclsyntax.Block{}
	for _, b := range c.blocks {
		if b.Type == typ {
			out[strings.Join(b.Labels, ".")] = b
		}
	}
	return out
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// The variables and outputs the chart's wiring relies on (the example and the README).
var (
	chartVariables = []string{"name", "vpc_id", "subnets", "route_table_ids", "client_cidrs", "s3_prefix",
		"eks_oidc_provider_arn", "namespace", "service_account", "ports", "broker_uid"}
	chartOutputs = []string{"bucket_name", "region", "s3_prefix", "nfs_dns_name", "nfs_junction_path",
		"broker_role_arn", "zones", "broker_security_group_id", "controller_security_group_id",
		"ontap_export_commands", "fsx_management_dns_name"}
)

func TestModuleInterface(t *testing.T) {
	m := parseDir(t, moduleDir)
	vars, outs := m.named("variable"), m.named("output")
	for _, v := range chartVariables {
		if vars[v] == nil {
			t.Errorf("module lacks variable %q (have %v)", v, keys(vars))
		}
	}
	for _, o := range chartOutputs {
		if outs[o] == nil {
			t.Errorf("module lacks output %q (have %v)", o, keys(outs))
		}
	}
	res := m.named("resource")
	for _, r := range []string{
		"aws_subnet.weir", "aws_fsx_ontap_file_system.wal", "aws_fsx_ontap_storage_virtual_machine.wal",
		"aws_fsx_ontap_volume.wal", "aws_s3_bucket.objects", "aws_s3_bucket_server_side_encryption_configuration.objects",
		"aws_s3_bucket_lifecycle_configuration.objects", "aws_s3_bucket_public_access_block.objects",
		"aws_iam_role.broker", "aws_iam_role_policy.broker",
		"aws_security_group.broker", "aws_security_group.controller", "aws_security_group.fsx",
	} {
		if res[r] == nil {
			t.Errorf("module lacks resource %s", r)
		}
	}
	// FSx: Multi-AZ only (the variable's validation), a volume never tiered off SSD.
	dt := vars["fsx_deployment_type"]
	if dt == nil || !strings.Contains(blockSource(t, dt), `startswith(var.fsx_deployment_type, "MULTI_AZ")`) {
		t.Error("fsx_deployment_type does not insist on Multi-AZ")
	}
	vol := res["aws_fsx_ontap_volume.wal"]
	if tp := child(vol, "tiering_policy"); tp == nil || evalString(t, tp.Body.Attributes["name"].Expr, nil) != "NONE" {
		t.Error("the WAL volume may be tiered to the capacity pool (produce latency)")
	}
	// Three zones, distinct.
	if !strings.Contains(blockSource(t, vars["subnets"]), "length(var.subnets) == 3") {
		t.Error("subnets: no check for three zones")
	}
	// Lifecycle: multipart uploads aborted, old versions expired, and no expiration of
	// current objects by age (Weir deletes its own garbage; an age rule deletes live data).
	lc := res["aws_s3_bucket_lifecycle_configuration.objects"]
	rule := child(lc, "rule")
	if rule == nil || child(rule, "abort_incomplete_multipart_upload") == nil || child(rule, "noncurrent_version_expiration") == nil {
		t.Error("lifecycle rule lacks abort_incomplete_multipart_upload or noncurrent_version_expiration")
	}
	for _, r := range childrenAll(lc, "rule") {
		if e := child(r, "expiration"); e != nil {
			for name := range e.Body.Attributes {
				if name == "days" || name == "date" {
					t.Errorf("lifecycle expires current objects by %s: Weir's live objects would go", name)
				}
			}
		}
	}
	sse := child(child(res["aws_s3_bucket_server_side_encryption_configuration.objects"], "rule"), "apply_server_side_encryption_by_default")
	if sse == nil || sse.Body.Attributes["sse_algorithm"] == nil {
		t.Error("bucket without default encryption")
	}
}

// TestModuleSecurityGroupPorts: every ingress rule opens a port the chart uses (from the
// chart's values.yaml), NFS to FSx or SSH to FSx's management; every chart port is opened.
func TestModuleSecurityGroupPorts(t *testing.T) {
	m := parseDir(t, moduleDir)
	vars := m.named("variable")
	ports := evalValue(t, vars["ports"].Body.Attributes["default"].Expr, nil)
	subnets := cty.TupleVal([]cty.Value{cty.StringVal("a"), cty.StringVal("b"), cty.StringVal("c")})
	ctx := &hcl.EvalContext{Variables: map[string]cty.Value{
		"var": cty.ObjectVal(map[string]cty.Value{"ports": ports, "subnets": subnets}),
	}, Functions: map[string]function.Function{"length": stdlib.LengthFunc}}
	locals := map[string]cty.Value{}
	for _, b := range m.blocks {
		if b.Type == "locals" {
			if a, ok := b.Body.Attributes["kafka_to"]; ok {
				locals["kafka_to"] = evalValue(t, a.Expr, ctx)
			}
		}
	}
	ctx.Variables["local"] = cty.ObjectVal(locals)

	vals := chartValues(t)
	num := func(path ...string) int {
		v := any(vals)
		for _, p := range path {
			v = v.(map[string]any)[p]
		}
		return int(v.(float64))
	}
	zones := len(vals["broker"].(map[string]any)["zones"].([]any))
	want := map[int]string{
		num("broker", "kafkaPort"):    "kafka",
		num("broker", "gossipPort"):   "gossip",
		num("broker", "metricsPort"):  "metrics",
		num("controller", "raftPort"): "raft",
		num("controller", "apiPort"):  "controller api",
	}
	for i := 0; i < zones; i++ {
		want[num("broker", "zoneListenerBasePort")+i] = "zone listener"
	}
	allowed := map[int]bool{2049: true, 22: true}
	for p := range want {
		allowed[p] = true
	}
	opened := map[int]bool{}
	for name, r := range m.named("resource") {
		if !strings.HasPrefix(name, "aws_vpc_security_group_ingress_rule.") {
			continue
		}
		from := int(evalNumber(t, r.Body.Attributes["from_port"].Expr, ctx))
		to := int(evalNumber(t, r.Body.Attributes["to_port"].Expr, ctx))
		if to-from > 8 || to < from {
			t.Errorf("%s opens %d-%d", name, from, to)
			continue
		}
		for p := from; p <= to; p++ {
			if !allowed[p] {
				t.Errorf("%s opens port %d, which Weir does not use", name, p)
			}
			opened[p] = true
		}
	}
	for p, what := range want {
		if !opened[p] {
			t.Errorf("the chart's %s port %d is opened by no rule", what, p)
		}
	}
	if !opened[2049] {
		t.Error("NFS (2049) to FSx not opened")
	}
}

// TestModuleIAMMatchesObjectStore: the brokers' policy grants exactly the S3 actions the
// object store's calls need: a new call in objectstore/s3 fails here until the policy has it.
func TestModuleIAMMatchesObjectStore(t *testing.T) {
	src, err := os.ReadFile(s3Source)
	if err != nil {
		t.Fatal(err)
	}
	need := map[string]string{
		"PutObject": "s3:PutObject", "GetObject": "s3:GetObject", "HeadObject": "s3:GetObject",
		"DeleteObject": "s3:DeleteObject", "HeadBucket": "s3:ListBucket", "ListObjectsV2": "s3:ListBucket",
	}
	want := map[string]bool{}
	calls := regexp.MustCompile(`s\.client\.([A-Z]\w+)\(|NewListObjectsV2Paginator`).FindAllStringSubmatch(string(src), -1)
	if len(calls) < 4 {
		t.Fatalf("found %d S3 calls in %s", len(calls), s3Source)
	}
	for _, c := range calls {
		api := c[1]
		if api == "" {
			api = "ListObjectsV2"
		}
		action, ok := need[api]
		if !ok {
			t.Errorf("objectstore/s3 calls %s: add its IAM action to the module's broker policy and to this table", api)
			continue
		}
		want[action] = true
	}
	m := parseDir(t, moduleDir)
	doc := m.named("data")["aws_iam_policy_document.broker"]
	if doc == nil {
		t.Fatal("no aws_iam_policy_document.broker")
	}
	got := map[string]bool{}
	var walk func(b *hclsyntax.Block)
	walk = func(b *hclsyntax.Block) {
		if a, ok := b.Body.Attributes["actions"]; ok {
			for _, v := range evalValue(t, a.Expr, nil).AsValueSlice() {
				if s := v.AsString(); strings.HasPrefix(s, "s3:") {
					got[s] = true
				}
			}
		}
		for _, c := range b.Body.Blocks {
			walk(c)
		}
	}
	walk(doc)
	if strings.Join(keys(got), ",") != strings.Join(keys(want), ",") {
		t.Errorf("broker policy S3 actions %v, objectstore/s3 needs %v", keys(got), keys(want))
	}
}

// TestExampleWiresChart: the example calls the module with its variables only (and every
// required one), and sets chart values that exist from module outputs that exist.
func TestExampleWiresChart(t *testing.T) {
	m := parseDir(t, moduleDir)
	vars, outs := m.named("variable"), m.named("output")
	ex := parseDir(t, exampleDir)
	mod := ex.named("module")["weir"]
	if mod == nil {
		t.Fatal("example has no module \"weir\"")
	}
	if src := evalString(t, mod.Body.Attributes["source"].Expr, nil); filepath.Clean(filepath.Join(exampleDir, src)) != moduleDir {
		t.Errorf("module source %s is not %s", src, moduleDir)
	}
	for name := range mod.Body.Attributes {
		if name != "source" && vars[name] == nil {
			t.Errorf("example sets %s, not a variable of the module", name)
		}
	}
	for name, v := range vars {
		if _, hasDefault := v.Body.Attributes["default"]; !hasDefault && mod.Body.Attributes[name] == nil {
			t.Errorf("example does not set the module's required variable %s", name)
		}
	}
	// Every module.weir.X the example reads is an output.
	for _, b := range ex.blocks {
		for _, tr := range traversals(b) {
			if tr.RootName() == "module" && len(tr) >= 3 {
				modName := tr[1].(hcl.TraverseAttr).Name
				out := tr[2].(hcl.TraverseAttr).Name
				if modName == "weir" && outs[out] == nil {
					t.Errorf("example reads module.weir.%s, not an output", out)
				}
			}
		}
	}
	// The chart: its path, and each value set exists in values.yaml.
	rel := ex.named("resource")["helm_release.weir"]
	if rel == nil {
		t.Fatal("example installs no helm_release.weir")
	}
	chartPath := strings.Replace(exprSource(t, rel.Body.Attributes["chart"].Expr), "${path.module}", exampleDir, 1)
	chartPath = strings.Trim(chartPath, `"`)
	if _, err := os.Stat(filepath.Join(chartPath, "Chart.yaml")); err != nil {
		t.Errorf("example's chart %s: %v", chartPath, err)
	}
	vals := chartValues(t)
	set := map[string]bool{}
	for _, name := range setNames(t, ex, rel) {
		set[name] = true
		if !valuePathExists(vals, name) {
			t.Errorf("example sets chart value %s, which values.yaml does not have", name)
		}
	}
	if len(set) < 5 {
		t.Errorf("example sets only %v", keys(set))
	}
	for _, v := range []string{"s3.bucket", "s3.region", "wal.nfs.server", "wal.nfs.path"} {
		if !set[v] {
			t.Errorf("example does not set %s from the module", v)
		}
	}
}

// setNames: the chart value names a helm_release sets: its set blocks' names, and for a
// dynamic "set" named by set.key, the keys of the local map it iterates.
func setNames(t *testing.T, c *config, rel *hclsyntax.Block) []string {
	t.Helper()
	locals := map[string]hclsyntax.Expression{}
	for _, b := range c.blocks {
		if b.Type == "locals" {
			for n, a := range b.Body.Attributes {
				locals[n] = a.Expr
			}
		}
	}
	var out []string
	for _, s := range rel.Body.Blocks {
		var nameExpr hclsyntax.Expression
		switch {
		case s.Type == "set":
			nameExpr = s.Body.Attributes["name"].Expr
		case s.Type == "dynamic" && s.Labels[0] == "set":
			nameExpr = child(s, "content").Body.Attributes["name"].Expr
		default:
			continue
		}
		if src := exprSource(t, nameExpr); src != "set.key" {
			out = append(out, strings.Trim(src, `"`))
			continue
		}
		vars := s.Body.Attributes["for_each"].Expr.Variables()
		if len(vars) != 1 || vars[0].RootName() != "local" {
			t.Fatalf("dynamic set over %s: not a local map", exprSource(t, s.Body.Attributes["for_each"].Expr))
		}
		m, ok := locals[vars[0][1].(hcl.TraverseAttr).Name].(*hclsyntax.ObjectConsExpr)
		if !ok {
			t.Fatalf("dynamic set over %s: not a map literal", exprSource(t, s.Body.Attributes["for_each"].Expr))
		}
		for _, item := range m.Items {
			out = append(out, evalString(t, item.KeyExpr, nil))
		}
	}
	return out
}

// valuePathExists: "a.b[0].c" or "serviceAccount.annotations.x\.y/z" exists in values as
// far as values.yaml declares it (a map or list declared empty takes any key below it).
func valuePathExists(vals map[string]any, path string) bool {
	path = regexp.MustCompile(`\[\$\{[^}]*\}\]`).ReplaceAllString(path, "[0]") // an index from a for_each
	path = regexp.MustCompile(`\\\\?\.`).ReplaceAllStringFunc(path, func(s string) string {
		if strings.HasPrefix(s, `\`) {
			return "\x00"
		}
		return s
	})
	var cur any = vals
	for _, part := range strings.Split(path, ".") {
		part = strings.ReplaceAll(part, "\x00", ".")
		idx := ""
		if i := strings.Index(part, "["); i >= 0 {
			part, idx = part[:i], part[i:]
		}
		m, ok := cur.(map[string]any)
		if !ok {
			return false
		}
		next, ok := m[part]
		if !ok {
			return len(m) == 0 && part != ""
		}
		if idx != "" {
			l, ok := next.([]any)
			if !ok || len(l) == 0 {
				return ok
			}
			next = l[0]
		}
		cur = next
		if mm, ok := cur.(map[string]any); ok && len(mm) == 0 {
			return true
		}
	}
	return true
}

func chartValues(t *testing.T) map[string]any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(chartDir, "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var v map[string]any
	if err := yaml.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

func child(b *hclsyntax.Block, typ string) *hclsyntax.Block {
	if b == nil {
		return nil
	}
	for _, c := range b.Body.Blocks {
		if c.Type == typ {
			return c
		}
	}
	return nil
}

func childrenAll(b *hclsyntax.Block, typ string) []*hclsyntax.Block {
	var out []*hclsyntax.Block
	for _, c := range b.Body.Blocks {
		if c.Type == typ {
			out = append(out, c)
		}
	}
	return out
}

func traversals(b *hclsyntax.Block) []hcl.Traversal {
	var out []hcl.Traversal
	for _, a := range b.Body.Attributes {
		out = append(out, a.Expr.Variables()...)
	}
	for _, c := range b.Body.Blocks {
		out = append(out, traversals(c)...)
	}
	return out
}

func blockSource(t *testing.T, b *hclsyntax.Block) string {
	t.Helper()
	src, err := os.ReadFile(b.Range().Filename)
	if err != nil {
		t.Fatal(err)
	}
	return string(b.Range().SliceBytes(src))
}

func exprSource(t *testing.T, e hcl.Expression) string {
	t.Helper()
	src, err := os.ReadFile(e.Range().Filename)
	if err != nil {
		t.Fatal(err)
	}
	return string(e.Range().SliceBytes(src))
}

func evalValue(t *testing.T, e hcl.Expression, ctx *hcl.EvalContext) cty.Value {
	t.Helper()
	v, diags := e.Value(ctx)
	if diags.HasErrors() {
		t.Fatalf("%s: %s", e.Range(), diags.Error())
	}
	return v
}

func evalString(t *testing.T, e hcl.Expression, ctx *hcl.EvalContext) string {
	t.Helper()
	v := evalValue(t, e, ctx)
	if v.Type() != cty.String {
		t.Fatalf("%s: not a string", e.Range())
	}
	return v.AsString()
}

func evalNumber(t *testing.T, e hcl.Expression, ctx *hcl.EvalContext) float64 {
	t.Helper()
	v := evalValue(t, e, ctx)
	if v.Type() != cty.Number {
		t.Fatalf("%s: not a number", e.Range())
	}
	f, _ := v.AsBigFloat().Float64()
	return f
}
