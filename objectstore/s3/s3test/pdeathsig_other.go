//go:build !linux

package s3test

import "os/exec"

func setPdeathsig(cmd *exec.Cmd) {}
