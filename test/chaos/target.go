package chaos

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/weir-io/weir/test/proccluster"
)

// target is the cluster faults act on.
type target interface {
	Bootstrap() []string
	// Brokers are the broker ids faults may hit.
	Brokers() []int32
	Kill(id int32) error
	Start(id int32) error // after Kill or Stop; returns once it serves again
	Stop(id int32) error  // graceful (SIGTERM), returns once it exited
	Pause(id int32) error
	Resume(id int32) error
	Cut(id int32) error
	Heal(id int32) error
	ControllerLeader() (int32, error)
	KillController(id int32) error
	StartController(id int32) error
	// ControllerAPIs are the controllers' API addresses (none: attached without
	// --controllers).
	ControllerAPIs() []string
	Close()
}

// procTarget is a cluster of processes run by this command.
type procTarget struct{ c *proccluster.Cluster }

func (t procTarget) Bootstrap() []string { return t.c.Bootstrap() }

func (t procTarget) Brokers() []int32 {
	var out []int32
	for _, b := range t.c.Brokers {
		out = append(out, b.ID)
	}
	return out
}

func (t procTarget) Kill(id int32) error { t.c.Broker(id).Kill(); return nil }

func (t procTarget) Start(id int32) error {
	b := t.c.Broker(id)
	if err := b.Start(); err != nil {
		return err
	}
	return b.WaitReady(context.Background(), 2*time.Minute)
}

func (t procTarget) Stop(id int32) error { t.c.Broker(id).Stop(time.Minute); return nil }

func (t procTarget) Pause(id int32) error  { return t.c.Broker(id).Signal(syscall.SIGSTOP) }
func (t procTarget) Resume(id int32) error { return t.c.Broker(id).Signal(syscall.SIGCONT) }
func (t procTarget) Cut(id int32) error    { t.c.Cut(id); return nil }
func (t procTarget) Heal(id int32) error   { t.c.Heal(id); return nil }

// ControllerLeader asks the controllers' status API who leads.
func (t procTarget) ControllerLeader() (int32, error) {
	cl := http.Client{Timeout: 2 * time.Second}
	for _, p := range t.c.Controllers {
		if !p.Running() {
			continue
		}
		resp, err := cl.Get("http://" + p.API + "/v1/status")
		if err != nil {
			continue
		}
		var st struct {
			State    string `json:"state"`
			LeaderID int32  `json:"leader_id"`
		}
		err = json.NewDecoder(resp.Body).Decode(&st)
		resp.Body.Close()
		if err == nil && st.LeaderID > 0 {
			return st.LeaderID, nil
		}
	}
	return 0, errors.New("chaos: no controller leader")
}

func (t procTarget) KillController(id int32) error { t.c.Controllers[id-1].Kill(); return nil }

func (t procTarget) StartController(id int32) error {
	p := t.c.Controllers[id-1]
	if err := p.Start(); err != nil {
		return err
	}
	return p.WaitReady(context.Background(), 2*time.Minute)
}

func (t procTarget) ControllerAPIs() []string { return t.c.ControllerAPIs() }

func (t procTarget) Close() { t.c.Close() }

// cmdTarget acts on an existing cluster through the user's commands ({id} is replaced).
type cmdTarget struct {
	cfg       Config
	bootstrap []string
	ids       []int32
}

func (t cmdTarget) Bootstrap() []string { return t.bootstrap }
func (t cmdTarget) Brokers() []int32    { return t.ids }

func (t cmdTarget) run(tmpl string, id int32) (string, error) {
	if tmpl == "" {
		return "", errors.New("chaos: no command given for this fault in attach mode")
	}
	cmd := strings.ReplaceAll(tmpl, "{id}", strconv.Itoa(int(id)))
	out, err := exec.Command("sh", "-c", cmd).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("chaos: %q: %w: %s", cmd, err, out)
	}
	return string(out), nil
}

func (t cmdTarget) Kill(id int32) error   { _, err := t.run(t.cfg.KillCmd, id); return err }
func (t cmdTarget) Start(id int32) error  { _, err := t.run(t.cfg.StartCmd, id); return err }
func (t cmdTarget) Stop(id int32) error   { _, err := t.run(t.cfg.StopCmd, id); return err }
func (t cmdTarget) Pause(id int32) error  { _, err := t.run(t.cfg.PauseCmd, id); return err }
func (t cmdTarget) Resume(id int32) error { _, err := t.run(t.cfg.ResumeCmd, id); return err }
func (t cmdTarget) Cut(id int32) error    { _, err := t.run(t.cfg.CutCmd, id); return err }
func (t cmdTarget) Heal(id int32) error   { _, err := t.run(t.cfg.HealCmd, id); return err }

func (t cmdTarget) ControllerLeader() (int32, error) {
	out, err := t.run(t.cfg.ControllerLeaderCmd, 0)
	if err != nil {
		return 0, err
	}
	n, err := strconv.Atoi(strings.TrimSpace(out))
	if err != nil {
		return 0, fmt.Errorf("chaos: --controller-leader-cmd printed %q, want an id", out)
	}
	return int32(n), nil
}

func (t cmdTarget) KillController(id int32) error {
	_, err := t.run(t.cfg.KillControllerCmd, id)
	return err
}

func (t cmdTarget) StartController(id int32) error {
	_, err := t.run(t.cfg.StartControllerCmd, id)
	return err
}

func (t cmdTarget) ControllerAPIs() []string {
	var out []string
	for _, a := range strings.Split(t.cfg.Controllers, ",") {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	return out
}

func (t cmdTarget) Close() {}
