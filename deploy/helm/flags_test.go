package helm

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// The weir binary the chart's arguments are checked against: WEIR_BIN, else built once
// from the main module (../../cmd/weir) into a temporary directory.
var weirBin struct {
	once sync.Once
	path string
	dir  string
	err  error
}

func weir(t *testing.T) string {
	t.Helper()
	weirBin.once.Do(func() {
		if p := os.Getenv("WEIR_BIN"); p != "" {
			weirBin.path = p
			return
		}
		dir, err := os.MkdirTemp("", "weir-helm-test")
		if err != nil {
			weirBin.err = err
			return
		}
		weirBin.dir = dir
		weirBin.path = filepath.Join(dir, "weir")
		cmd := exec.Command("go", "build", "-o", weirBin.path, "./cmd/weir")
		cmd.Dir = filepath.Join("..", "..")
		if out, err := cmd.CombinedOutput(); err != nil {
			weirBin.err = err
			t.Logf("go build ./cmd/weir: %s", out)
		}
	})
	if weirBin.err != nil {
		t.Fatalf("building weir: %v", weirBin.err)
	}
	return weirBin.path
}

func cleanupWeir() {
	if weirBin.dir != "" {
		os.RemoveAll(weirBin.dir)
	}
}

var flagCache sync.Map // subcommand → map[string]bool

// weirFlags returns the flags `weir <sub...> --help` lists (Go's flag package prints each
// as a line "  -name [type]").
func weirFlags(t *testing.T, sub ...string) map[string]bool {
	t.Helper()
	key := strings.Join(sub, " ")
	if f, ok := flagCache.Load(key); ok {
		return f.(map[string]bool)
	}
	cmd := exec.Command(weir(t), append(sub, "--help")...)
	out, _ := cmd.CombinedOutput() // --help exits non-zero (flag.ErrHelp) on some commands
	flags := map[string]bool{}
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "  -") {
			continue
		}
		name := strings.Fields(strings.TrimPrefix(line, "  -"))[0]
		flags[name] = true
	}
	if len(flags) < 3 {
		t.Fatalf("weir %s --help listed %d flags:\n%s", key, len(flags), out)
	}
	flagCache.Store(key, flags)
	return flags
}

// checkArgs fails unless every --flag in args (after the subcommand words) is one weir's
// subcommand takes, and every $(VAR) it references is in env.
func checkArgs(t *testing.T, where string, c corev1.Container) {
	t.Helper()
	var sub []string
	args := c.Args
	for len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		sub = append(sub, args[0])
		args = args[1:]
	}
	if len(sub) == 0 {
		t.Fatalf("%s: container %s runs no weir subcommand: %v", where, c.Name, c.Args)
	}
	flags := weirFlags(t, sub...)
	env := map[string]bool{}
	for _, e := range c.Env {
		env[e.Name] = true
	}
	for _, a := range args {
		if !strings.HasPrefix(a, "--") {
			t.Errorf("%s: %q is not a --flag", where, a)
			continue
		}
		name, _, _ := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		if !flags[name] {
			t.Errorf("%s: weir %s has no flag --%s", where, strings.Join(sub, " "), name)
		}
		for rest := a; ; {
			i := strings.Index(rest, "$(")
			if i < 0 {
				break
			}
			j := strings.Index(rest[i:], ")")
			v := rest[i+2 : i+j]
			if !env[v] {
				t.Errorf("%s: %q references $(%s), not in the container's env", where, a, v)
			}
			rest = rest[i+j:]
		}
	}
}
