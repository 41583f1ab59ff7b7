package main

import (
	"context"
	"flag"
	"fmt"

	"github.com/weir-io/weir/controller"
)

// runController runs one member of the Raft controller quorum.
func runController(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("weir controller", flag.ContinueOnError)
	cfg := controller.DefaultConfig()
	cfg.BindFlags(fs)
	p := newProcess(fs, "info", "", "address for /metrics, /healthz and /readyz (empty: off)")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), "Usage: weir controller [flags]\n\nRuns one controller of the Raft quorum that owns Weir's metadata. Start every\n"+
			"controller with the same --peers; a controller with no Raft state bootstraps the quorum from it.\n"+
			"Example: weir controller --node-id 1 --data-dir /var/lib/weir/c1 \\\n"+
			"  --peers 1=10.0.1.1:9301/10.0.1.1:9401,2=10.0.2.1:9301/10.0.2.1:9401,3=10.0.3.1:9301/10.0.3.1:9401\n\n")
		fs.PrintDefaults()
	}
	if ok, err := p.parse(fs, args); !ok {
		return err
	}
	defer p.stop()
	cfg.Logger, cfg.Registerer = p.log, p.reg
	c, err := controller.New(cfg)
	if err != nil {
		return err
	}
	if err := c.Start(); err != nil {
		c.Close()
		return err
	}
	p.ready.Store(true)
	fmt.Printf("weir controller %d: raft %s, API %s\n", cfg.NodeID, c.RaftAddr(), c.Addr())
	<-ctx.Done()
	p.ready.Store(false)
	return c.Close()
}
