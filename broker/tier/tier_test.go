package tier

import (
	"errors"
	"flag"
	"strings"
	"testing"
	"time"

	"github.com/weir-io/weir/internal/testutil"
)

// Admit lets produce through while the WAL holds up to 3/4 of WALMaxBytes, delays it
// in proportion beyond (up to a second just below the bound), and refuses it at the
// bound with ErrWALFull; without a bound it never slows anything.
func TestAdmitSlowsThenRefuses(t *testing.T) {
	r := newRig(t, rigOpts{})
	r.produceWAL(t, 20)
	held := r.tr.WALHeld()
	if held <= 0 || held != int64(r.w.End()-r.w.Start()) {
		t.Fatalf("WALHeld %d", held)
	}
	admit := func(lim int64) (time.Duration, error) {
		r.tr.cfg.WALMaxBytes = lim
		return r.tr.Admit()
	}
	if d, err := admit(0); d != 0 || err != nil {
		t.Fatalf("no bound: %v %v", d, err)
	}
	if d, err := admit(held * 4 / 3 * 1001 / 1000); d != 0 || err != nil {
		t.Fatalf("just under 3/4 of the bound: %v %v, want no delay", d, err)
	}
	lim := held * 8 / 7 // held is then half way between 3/4 of the bound and the bound
	if d, err := admit(lim); err != nil || d < 490*time.Millisecond || d > 510*time.Millisecond {
		t.Fatalf("half way to the bound: %v %v, want about 500 ms", d, err)
	}
	if d, err := admit(held + 1); err != nil || d < 990*time.Millisecond || d >= time.Second {
		t.Fatalf("just below the bound: %v %v, want just under a second", d, err)
	}
	for _, lim := range []int64{held, held - 1, 1} {
		if _, err := admit(lim); !errors.Is(err, ErrWALFull) {
			t.Fatalf("bound %d with %d held: %v, want ErrWALFull", lim, held, err)
		}
	}
}

// An upload is due when enough is pending, when the oldest pending batch is old enough,
// or when the WAL holds more than half its bound, whichever comes first.
func TestUploadDueUnderWALPressure(t *testing.T) {
	r := newRig(t, rigOpts{cfg: func(c *Config) {
		c.MaxUploadDelay = time.Hour
		c.TargetObjectBytes, c.MaxObjectBytes = 1<<30, 1<<30
	}})
	r.produceWAL(t, 10)
	held := r.tr.WALHeld()
	led := r.tr.d.Led()
	r.tr.cfg.WALMaxBytes = 2 * held
	if r.tr.uploadDue(led) {
		t.Fatal("due with little pending, nothing old and the WAL at half its bound")
	}
	if _, err := r.tr.uploadOnce(); err != nil || len(r.committed()) != 0 {
		t.Fatalf("uploaded though not due: %v, %v", r.committed(), err)
	}
	r.tr.cfg.WALMaxBytes = 2*held - 1
	if !r.tr.uploadDue(led) {
		t.Fatal("not due with the WAL above half its bound")
	}
	r.tr.cfg.WALMaxBytes = 0
	pending, _ := r.p.Pending()
	r.tr.cfg.TargetObjectBytes = pending
	if !r.tr.uploadDue(led) {
		t.Fatal("not due with the target pending")
	}
	r.tr.cfg.TargetObjectBytes, r.tr.cfg.MaxUploadDelay = 1<<30, time.Nanosecond
	if !r.tr.uploadDue(led) {
		t.Fatal("not due with the oldest batch older than MaxUploadDelay")
	}
	if _, err := r.tr.uploadOnce(); err != nil {
		t.Fatal(err)
	}
	r.checkManifest(t)
}

// Validate turns a zero Config into the defaults and refuses each invalid setting.
func TestConfigValidate(t *testing.T) {
	var zero Config
	if err := zero.Validate(); err != nil || zero != DefaultConfig() {
		t.Fatalf("zero config: %+v %v, want the defaults", zero, err)
	}
	for _, c := range []struct {
		name string
		set  func(*Config)
		want string // in the error; "" for valid
	}{
		{"defaults", func(*Config) {}, ""},
		{"smallest block", func(c *Config) { c.BlockSize = 4096 }, ""},
		{"no WAL bound", func(c *Config) { c.WALMaxBytes = 0 }, ""},
		{"max equals target", func(c *Config) { c.MaxObjectBytes = c.TargetObjectBytes }, ""},
		{"no target", func(c *Config) { c.TargetObjectBytes = 0 }, "target object bytes"},
		{"max below target", func(c *Config) { c.MaxObjectBytes = c.TargetObjectBytes - 1 }, "below the target"},
		{"no upload delay", func(c *Config) { c.MaxUploadDelay = 0 }, "intervals"},
		{"no check interval", func(c *Config) { c.CheckInterval = 0 }, "intervals"},
		{"no retention interval", func(c *Config) { c.RetentionInterval = -time.Second }, "intervals"},
		{"block too small", func(c *Config) { c.BlockSize = 4095 }, "too small"},
		{"negative WAL bound", func(c *Config) { c.WALMaxBytes = -1 }, "WAL max bytes"},
		{"bad read config", func(c *Config) { c.Read.ReadaheadBytes = c.Read.BlockCacheBytes }, "readahead"},
	} {
		cfg := DefaultConfig()
		c.set(&cfg)
		err := cfg.Validate()
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
}

// New refuses an invalid config and missing dependencies.
func TestNewChecksConfigAndDeps(t *testing.T) {
	r := newRig(t, rigOpts{})
	full := r.tr.d
	full.Registerer = nil
	bad := DefaultConfig()
	bad.BlockSize = 1
	if _, err := New(bad, full); err == nil {
		t.Fatal("New accepted an invalid config")
	}
	for name, drop := range map[string]func(*Deps){
		"store":     func(d *Deps) { d.Store = nil },
		"metadata":  func(d *Deps) { d.Meta = nil },
		"manifest":  func(d *Deps) { d.Manifest = nil },
		"WAL":       func(d *Deps) { d.WAL = nil },
		"led parts": func(d *Deps) { d.Led = nil },
	} {
		d := full
		drop(&d)
		if _, err := New(DefaultConfig(), d); err == nil {
			t.Errorf("New without %s succeeded", name)
		}
	}
}

// Start runs the upload and retention loops on their intervals until Close.
func TestStartRunsUploadAndRetentionLoops(t *testing.T) {
	r := newRig(t, rigOpts{
		configs: map[string]string{"retention.ms": "1000"},
		cfg: func(c *Config) {
			c.CheckInterval, c.RetentionInterval = 5*time.Millisecond, 5*time.Millisecond
		},
	})
	r.produceAt(t, rigEpoch.UnixMilli())
	r.produceAt(t, rigEpoch.UnixMilli())
	r.tr.Start()
	testutil.Eventually(t, 30*time.Second, "the upload loop uploads both batches", func() bool { return r.p.Uploaded() == 2 })
	r.clock.Add(time.Hour)
	testutil.Eventually(t, 30*time.Second, "the retention loop raises the log start", func() bool {
		return r.manifest().LogStartOffset == 2 && len(r.meta.View().Objects) == 0
	})
}

// The flags (names users' deployments depend on) set the fields they name.
func TestBindFlags(t *testing.T) {
	cfg := DefaultConfig()
	fs := flag.NewFlagSet("tier", flag.ContinueOnError)
	cfg.BindFlags(fs)
	err := fs.Parse([]string{"--upload-target-bytes=1048576", "--upload-max-bytes=2097152", "--upload-max-delay=3s",
		"--wal-max-bytes=0", "--retention-check-interval=1m", "--block-cache-bytes=4194304", "--readahead-bytes=0",
		"--object-get-bytes=65536", "--object-max-gets=2"})
	if err != nil {
		t.Fatal(err)
	}
	want := DefaultConfig()
	want.TargetObjectBytes, want.MaxObjectBytes, want.MaxUploadDelay = 1<<20, 2<<20, 3*time.Second
	want.WALMaxBytes, want.RetentionInterval = 0, time.Minute
	want.Read.BlockCacheBytes, want.Read.ReadaheadBytes, want.Read.MaxGetBytes, want.Read.MaxGets = 4<<20, 0, 64<<10, 2
	if cfg != want {
		t.Fatalf("flags gave %+v, want %+v", cfg, want)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
}
