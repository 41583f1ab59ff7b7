package s3test

import (
	"os/exec"
	"syscall"
)

// setPdeathsig kills MinIO if the test process dies without stopping it.
func setPdeathsig(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
