package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/weir-io/weir/metadata"
	"github.com/weir-io/weir/security/sasl"
)

const userHelp = `Usage: weir admin user <set|delete|list> [flags]

Manages the SCRAM credentials SASL listeners check logins against (PLAIN logins are
checked against the same credentials). Only the salt, the iteration count and the derived
keys are stored; the password never leaves this command.

  set     create or replace a user's credentials: --name, --password-file, --mechanism
  delete  remove a user's credentials (--mechanism: only those; default all)
  list    users, mechanisms and iteration counts

Where the credentials live:
  --controllers  a cluster: through the controllers' API (no SASL needed: this is how the
                 first user is made; once users exist, Kafka tools can manage them with
                 AlterUserScramCredentials, e.g. kafka-configs.sh or kadm)
  --metadata-file  a standalone broker's <data-dir>/metadata.json, edited in place: only
                 while that broker is stopped (a running one would overwrite the change)

Examples:
  echo 'alice-secret' > pw && weir admin user set --name alice --password-file pw --mechanism SCRAM-SHA-512
  weir admin user list
  weir admin user delete --name alice

Flags:
`

// userStore is where the command reads and alters credentials.
type userStore interface {
	metadata.ScramStore
	View() *metadata.View
}

func runAdminUser(ctx context.Context, args []string, out io.Writer) error {
	if len(args) == 0 || args[0] == "--help" || args[0] == "-h" || args[0] == "help" {
		fmt.Fprint(out, userHelp)
		return nil
	}
	sub := args[0]
	fs := flag.NewFlagSet("weir admin user "+sub, flag.ContinueOnError)
	fs.SetOutput(out)
	var cc ctlConn
	cc.bind(fs) // --controllers (a cluster), --timeout, --cluster-token-file, --controller-tls-*
	metaFile := fs.String("metadata-file", "", "a stopped standalone broker's metadata.json (instead of --controllers)")
	name := fs.String("name", "", "set, delete: the user name")
	pwFile := fs.String("password-file", "", "set: file holding the password (one trailing newline is dropped; - reads stdin); never on the command line, where ps would show it")
	mechs := fs.String("mechanism", "SCRAM-SHA-256,SCRAM-SHA-512", "set, delete: comma-separated SCRAM mechanisms (delete: default all the user has)")
	iterations := fs.Int("iterations", sasl.DefaultIterations, fmt.Sprintf("set: PBKDF2 iterations (%d..%d)", metadata.ScramMinIterations, metadata.ScramMaxIterations))
	fs.Usage = func() {
		fmt.Fprint(out, userHelp)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	mechSet := false
	fs.Visit(func(f *flag.Flag) { mechSet = mechSet || f.Name == "mechanism" })

	var store userStore
	if *metaFile != "" {
		ls, err := metadata.OpenLocal(metadata.LocalConfig{Path: *metaFile})
		if err != nil {
			return err
		}
		store = ls
	} else {
		cctx, cancel, cl, err := cc.connect(ctx)
		if err != nil {
			return err
		}
		defer cancel()
		defer cl.Close()
		ctx, store = cctx, cl
	}

	parseMechs := func() ([]metadata.ScramMechanism, error) {
		var ms []metadata.ScramMechanism
		for _, s := range strings.Split(*mechs, ",") {
			m, ok := metadata.ParseScramMechanism(strings.ToUpper(strings.TrimSpace(s)))
			if !ok {
				return nil, fmt.Errorf("unknown mechanism %q (SCRAM-SHA-256 or SCRAM-SHA-512)", s)
			}
			ms = append(ms, m)
		}
		return ms, nil
	}
	// One alteration per request: Kafka's rules allow one per user.
	alter := func(a metadata.ScramAlteration) error {
		res, err := store.AlterScram(ctx, []metadata.ScramAlteration{a})
		if err != nil {
			return err
		}
		if len(res) != 1 {
			return fmt.Errorf("unexpected answer: %d results", len(res))
		}
		if res[0].Err != nil {
			return fmt.Errorf("%s %s: %w", a.User, a.Mechanism, res[0].Err)
		}
		return nil
	}

	switch sub {
	case "set":
		if *name == "" || *pwFile == "" {
			return errors.New("set needs --name and --password-file")
		}
		pw, err := readPassword(*pwFile)
		if err != nil {
			return err
		}
		ms, err := parseMechs()
		if err != nil {
			return err
		}
		if *iterations < metadata.ScramMinIterations || *iterations > metadata.ScramMaxIterations {
			return fmt.Errorf("--iterations %d: must be %d..%d", *iterations, metadata.ScramMinIterations, metadata.ScramMaxIterations)
		}
		for _, m := range ms {
			c, err := sasl.NewCredential(m.String(), pw, *iterations)
			if err != nil {
				return err
			}
			if err := alter(metadata.ScramAlteration{User: *name, Mechanism: m, Credential: metadata.ScramCredential{
				Mechanism: m, Iterations: int32(*iterations), Salt: c.Salt, StoredKey: c.StoredKey, ServerKey: c.ServerKey}}); err != nil {
				return err
			}
			fmt.Fprintf(out, "%s: %s set (%d iterations)\n", *name, m, *iterations)
		}
	case "delete":
		if *name == "" {
			return errors.New("delete needs --name")
		}
		creds := store.View().Scram[*name]
		var ms []metadata.ScramMechanism
		if mechSet {
			var err error
			if ms, err = parseMechs(); err != nil {
				return err
			}
		} else {
			for _, c := range creds {
				ms = append(ms, c.Mechanism)
			}
		}
		if len(ms) == 0 {
			return fmt.Errorf("%s has no credentials: %w", *name, metadata.ErrScramNotFound)
		}
		for _, m := range ms {
			if err := alter(metadata.ScramAlteration{User: *name, Mechanism: m, Delete: true}); err != nil {
				return err
			}
			fmt.Fprintf(out, "%s: %s deleted\n", *name, m)
		}
	case "list":
		users := store.View().Scram
		w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, "USER\tMECHANISM\tITERATIONS")
		for _, u := range users.Names() {
			for _, c := range users[u] {
				fmt.Fprintf(w, "%s\t%s\t%d\n", u, c.Mechanism, c.Iterations)
			}
		}
		return w.Flush()
	default:
		return fmt.Errorf("unknown user command %q\n\n%s", sub, userHelp)
	}
	return nil
}

// readPassword reads a password file ("-": stdin), dropping one trailing newline.
func readPassword(path string) (string, error) {
	var b []byte
	var err error
	if path == "-" {
		b, err = io.ReadAll(io.LimitReader(os.Stdin, 4096))
	} else {
		b, err = os.ReadFile(path)
	}
	if err != nil {
		return "", fmt.Errorf("reading the password: %w", err)
	}
	pw := strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
	if pw == "" {
		return "", errors.New("the password file is empty")
	}
	return pw, nil
}
