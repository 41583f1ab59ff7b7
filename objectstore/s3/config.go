package s3

import (
	"errors"
	"flag"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/weir-io/weir/objectstore"
)

// Config configures an S3-compatible store. Use DefaultConfig and adjust; Validate
// before use (New does).
type Config struct {
	// Endpoint is the service URL, e.g. "http://127.0.0.1:9000" (MinIO) or
	// "https://s3.svm1.example.com" (ONTAP S3). Empty: AWS S3 in Region.
	Endpoint string
	// Region signs the requests; S3-compatible servers usually accept "us-east-1".
	// Empty: from the environment (AWS_REGION, shared config), else us-east-1.
	Region string
	// Bucket must exist.
	Bucket string
	// Prefix is put before every key (a trailing '/' is added if missing), so several
	// clusters can share a bucket. Keys in List results come without it.
	Prefix string
	// PathStyle addresses the bucket in the path (http://host/bucket/key) instead of
	// the host name (http://bucket.host/key): needed by ONTAP S3 and MinIO.
	PathStyle bool
	// AccessKey and SecretKey (and SessionToken, optional) are static credentials.
	// Leave both empty to use the SDK's default chain (AWS_ACCESS_KEY_ID and
	// AWS_SECRET_ACCESS_KEY, shared files, web identity, EC2/ECS roles).
	AccessKey    string
	SecretKey    string
	SessionToken string
	// RequestTimeout is the longest one request may go without progress: without a
	// response while waiting for one, without reading or being read while a body moves.
	// A request that stalls that long fails with objectstore.ErrUnavailable. It does
	// not bound a large transfer that keeps moving.
	RequestTimeout time.Duration
	// SDKMaxAttempts is the attempts the SDK's own retryer makes per request. Default
	// 1 (none of its own): retries belong to objectstore.Retrying, where the policy,
	// the metrics and the logs of each attempt are the caller's.
	SDKMaxAttempts int
	// ListPageSize is the keys asked for per ListObjectsV2 page (1 to 1000).
	ListPageSize int
}

// DefaultConfig returns path-style addressing, a 30 s request timeout and no SDK retries;
// Bucket (and usually Endpoint) must still be set.
func DefaultConfig() Config {
	return Config{
		PathStyle:      true,
		RequestTimeout: 30 * time.Second,
		SDKMaxAttempts: 1,
		ListPageSize:   1000,
	}
}

// Validate reports the first invalid setting and normalizes Prefix.
func (c *Config) Validate() error {
	if c.Endpoint != "" {
		u, err := url.Parse(c.Endpoint)
		if err != nil {
			return fmt.Errorf("objectstore/s3: endpoint %q: %w", c.Endpoint, err)
		}
		if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
			return fmt.Errorf("objectstore/s3: endpoint %q must be http(s)://host[:port]", c.Endpoint)
		}
	}
	if err := validBucket(c.Bucket); err != nil {
		return err
	}
	if c.Prefix != "" {
		if !strings.HasSuffix(c.Prefix, "/") {
			c.Prefix += "/"
		}
		if err := objectstore.ValidateKey(strings.TrimSuffix(c.Prefix, "/")); err != nil {
			return fmt.Errorf("objectstore/s3: prefix %q: %w", c.Prefix, err)
		}
	}
	if (c.AccessKey == "") != (c.SecretKey == "") {
		return errors.New("objectstore/s3: set both access key and secret key, or neither (default credential chain)")
	}
	if c.RequestTimeout <= 0 {
		return fmt.Errorf("objectstore/s3: request timeout must be > 0, got %s", c.RequestTimeout)
	}
	if c.SDKMaxAttempts < 1 {
		return fmt.Errorf("objectstore/s3: SDK max attempts must be >= 1, got %d", c.SDKMaxAttempts)
	}
	if c.ListPageSize < 1 || c.ListPageSize > 1000 {
		return fmt.Errorf("objectstore/s3: list page size must be 1..1000, got %d", c.ListPageSize)
	}
	return nil
}

// validBucket checks the S3 bucket naming rules that matter for path-style and
// virtual-host addressing: 3–63 characters of a-z, 0-9, '.', '-', starting and ending
// with a letter or digit.
func validBucket(b string) error {
	if len(b) < 3 || len(b) > 63 {
		return fmt.Errorf("objectstore/s3: bucket %q must have 3 to 63 characters", b)
	}
	for i := 0; i < len(b); i++ {
		c := b[i]
		ok := 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '.' || c == '-'
		if !ok || (i == 0 || i == len(b)-1) && (c == '.' || c == '-') {
			return fmt.Errorf("objectstore/s3: bucket %q: only a-z, 0-9, '.', '-', starting and ending with a letter or digit", b)
		}
	}
	return nil
}

// BindFlags registers the store's flags (all prefixed s3-) on fs, writing into c.
// Prefer the default credential chain (AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY in the
// environment) to keys on the command line, where ps shows them.
func (c *Config) BindFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.Endpoint, "s3-endpoint", c.Endpoint, "S3 endpoint URL, e.g. http://127.0.0.1:9000 (empty: AWS S3 in --s3-region)")
	fs.StringVar(&c.Region, "s3-region", c.Region, "S3 region (empty: from AWS_REGION or the shared config, else us-east-1)")
	fs.StringVar(&c.Bucket, "s3-bucket", c.Bucket, "S3 bucket holding the objects")
	fs.StringVar(&c.Prefix, "s3-prefix", c.Prefix, "key prefix inside the bucket, e.g. weir/cluster-1/")
	fs.BoolVar(&c.PathStyle, "s3-path-style", c.PathStyle, "path-style addressing (ONTAP S3, MinIO); false: virtual-hosted style")
	fs.StringVar(&c.AccessKey, "s3-access-key", c.AccessKey, "static access key (empty: the AWS default credential chain)")
	fs.StringVar(&c.SecretKey, "s3-secret-key", c.SecretKey, "static secret key (prefer AWS_SECRET_ACCESS_KEY in the environment)")
	fs.DurationVar(&c.RequestTimeout, "s3-request-timeout", c.RequestTimeout, "fail an S3 request that makes no progress for this long")
}
