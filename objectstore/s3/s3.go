// Package s3 is the object store on S3-compatible services (AWS S3, ONTAP S3, MinIO),
// built on aws-sdk-go-v2.
//
// Error mapping (every error wraps the SDK's error too, for errors.As):
//
//	404, NoSuchKey, NotFound                      objectstore.ErrNotFound
//	416, InvalidRange                             objectstore.ErrInvalidRange (GetRange
//	                                              at offset == size gives zero bytes)
//	503 (SlowDown or any code), 429, Throttling   objectstore.ErrThrottled
//	other 5xx, InternalError, RequestTimeout      objectstore.ErrUnavailable
//	no response: refused, reset, EOF, dial or     objectstore.ErrUnavailable
//	TLS failure, a body cut short
//	no progress for Config.RequestTimeout         objectstore.ErrUnavailable
//	the caller's context ended                    its error (context.Canceled, ...)
//	BadDigest, InvalidDigest (Content-MD5)        objectstore.ErrMismatch
//	NoSuchBucket, 403, other 4xx                  no sentinel: a configuration problem
//
// The SDK's retryer makes Config.SDKMaxAttempts attempts (default 1) with no retry
// quota; wrap the store in objectstore.Retrying for the retry policy. Checksums are
// computed only when an operation requires them (ONTAP S3 and older S3-compatible
// servers reject the SDK's newer default trailing checksums); Put sends Content-MD5,
// which every server checks.
package s3

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	s3sdk "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/weir-io/weir/objectstore"
)

// Store is an objectstore.Store on one bucket (and key prefix) of an S3-compatible
// service.
type Store struct {
	client  *s3sdk.Client
	bucket  string
	prefix  string
	timeout time.Duration
	page    int32
}

var _ objectstore.Store = (*Store)(nil)

// New validates cfg and builds the client. It sends no request: use CheckBucket to
// fail fast on a wrong endpoint, bucket or credentials.
func New(ctx context.Context, cfg Config) (*Store, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	httpClient := awshttp.NewBuildableClient().
		WithReadTimeout(0). // the store's own watchdog applies Config.RequestTimeout
		WithDialerOptions(func(d *net.Dialer) {
			d.Timeout = min(cfg.RequestTimeout, 10*time.Second)
		}).
		WithTransportOptions(func(tr *http.Transport) {
			tr.MaxIdleConns = 256
			tr.MaxIdleConnsPerHost = 64 // parallel ranged GETs to one endpoint
			tr.IdleConnTimeout = 90 * time.Second
		})
	attempts := cfg.SDKMaxAttempts
	retryer := func() aws.Retryer {
		if attempts == 1 {
			return aws.NopRetryer{} // no retries, and no "max attempts" noise in errors
		}
		return retry.NewStandard(func(o *retry.StandardOptions) {
			o.MaxAttempts = attempts
			o.RateLimiter = ratelimit.None
		})
	}
	var awsCfg aws.Config
	if cfg.AccessKey != "" {
		awsCfg = aws.Config{
			Region:      cfg.Region,
			Credentials: aws.NewCredentialsCache(credentials.NewStaticCredentialsProvider(cfg.AccessKey, cfg.SecretKey, cfg.SessionToken)),
		}
	} else {
		var opts []func(*config.LoadOptions) error
		if cfg.Region != "" {
			opts = append(opts, config.WithRegion(cfg.Region))
		}
		var err error
		if awsCfg, err = config.LoadDefaultConfig(ctx, opts...); err != nil {
			return nil, fmt.Errorf("objectstore/s3: loading the default AWS configuration: %w", err)
		}
	}
	if awsCfg.Region == "" {
		awsCfg.Region = "us-east-1"
	}
	awsCfg.HTTPClient = httpClient
	awsCfg.Retryer = retryer
	awsCfg.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
	awsCfg.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
	client := s3sdk.NewFromConfig(awsCfg, func(o *s3sdk.Options) {
		o.UsePathStyle = cfg.PathStyle
		if cfg.Endpoint != "" {
			o.BaseEndpoint = aws.String(cfg.Endpoint)
		}
		o.DisableLogOutputChecksumValidationSkipped = true
	})
	return &Store{
		client:  client,
		bucket:  cfg.Bucket,
		prefix:  cfg.Prefix,
		timeout: cfg.RequestTimeout,
		page:    int32(cfg.ListPageSize),
	}, nil
}

// Client returns the SDK client (for tools and tests: creating buckets and the like).
func (s *Store) Client() *s3sdk.Client { return s.client }

// Bucket returns the bucket name.
func (s *Store) Bucket() string { return s.bucket }

// CheckBucket sends a HeadBucket request: it fails if the endpoint cannot be reached,
// the bucket does not exist or the credentials are refused.
func (s *Store) CheckBucket(ctx context.Context) error {
	w := s.watch(ctx)
	defer w.stop()
	_, err := s.client.HeadBucket(w.ctx, &s3sdk.HeadBucketInput{Bucket: &s.bucket})
	return s.mapErr(ctx, w, "head bucket", s.bucket, err)
}

// Put implements objectstore.Store. A seekable body is streamed (read twice over plain
// HTTP: once to sign it, once to send it); any other body is first read into memory.
func (s *Store) Put(ctx context.Context, key string, body io.Reader, size int64) error {
	if err := objectstore.ValidateKey(key); err != nil {
		return wrap("put", key, err)
	}
	if size < 0 {
		return wrap("put", key, fmt.Errorf("negative size %d", size))
	}
	if err := ctx.Err(); err != nil {
		return wrap("put", key, err)
	}
	var rs io.ReadSeeker
	if seeker, ok := body.(io.ReadSeeker); ok {
		cur, err := seeker.Seek(0, io.SeekCurrent)
		if err == nil {
			end, err := seeker.Seek(0, io.SeekEnd)
			if err != nil {
				return wrap("put", key, fmt.Errorf("seeking body: %w", err))
			}
			if _, err := seeker.Seek(cur, io.SeekStart); err != nil {
				return wrap("put", key, fmt.Errorf("seeking body: %w", err))
			}
			if end-cur != size {
				return wrap("put", key, fmt.Errorf("body has %d bytes, size says %d", end-cur, size))
			}
			rs = seeker
		}
	}
	if rs == nil {
		data, err := io.ReadAll(io.LimitReader(&ctxReader{ctx: ctx, r: body}, size+1))
		if err != nil {
			if cerr := ctx.Err(); cerr != nil {
				return wrap("put", key, cerr)
			}
			return wrap("put", key, fmt.Errorf("reading body: %w", err))
		}
		if int64(len(data)) != size {
			if int64(len(data)) > size {
				return wrap("put", key, fmt.Errorf("body has more than %d bytes, size says %d", size, size))
			}
			return wrap("put", key, fmt.Errorf("body has %d bytes, size says %d", len(data), size))
		}
		rs = bytes.NewReader(data)
	}
	sum, err := contentMD5(rs)
	if err != nil {
		return wrap("put", key, err)
	}
	w := s.watch(ctx)
	defer w.stop()
	_, err = s.client.PutObject(w.ctx, &s3sdk.PutObjectInput{
		Bucket:        &s.bucket,
		Key:           aws.String(s.prefix + key),
		Body:          &progressSeeker{rs: rs, w: w},
		ContentLength: aws.Int64(size),
		ContentMD5:    aws.String(sum),
	})
	return s.mapErr(ctx, w, "put", key, err)
}

// contentMD5 is the Content-MD5 header of the body from its current position (which it
// restores). The server refuses a PUT whose body does not match (400 BadDigest): a body
// corrupted on the way, or changed under the transport, is never stored. Content-MD5,
// not the SDK's newer x-amz-checksum-* headers or trailers, because every S3-compatible
// server checks it (ONTAP S3 and older servers refuse the trailers). It costs one more
// pass over the body (about 1.5 ms per MiB of one core).
func contentMD5(rs io.ReadSeeker) (string, error) {
	cur, err := rs.Seek(0, io.SeekCurrent)
	if err != nil {
		return "", fmt.Errorf("seeking body: %w", err)
	}
	h := md5.New()
	if _, err := io.Copy(h, rs); err != nil {
		return "", fmt.Errorf("reading body for Content-MD5: %w", err)
	}
	if _, err := rs.Seek(cur, io.SeekStart); err != nil {
		return "", fmt.Errorf("seeking body: %w", err)
	}
	return base64.StdEncoding.EncodeToString(h.Sum(nil)), nil
}

// GetRange implements objectstore.Store.
func (s *Store) GetRange(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	if err := objectstore.ValidateKey(key); err != nil {
		return nil, wrap("get", key, err)
	}
	if err := objectstore.CheckRange(offset, length); err != nil {
		return nil, wrap("get", key, err)
	}
	if err := ctx.Err(); err != nil {
		return nil, wrap("get", key, err)
	}
	if length == 0 { // S3 cannot express an empty range
		return s.emptyRange(ctx, key, offset, nil)
	}
	in := &s3sdk.GetObjectInput{Bucket: &s.bucket, Key: aws.String(s.prefix + key)}
	if length > math.MaxInt64-offset {
		length = -1 // to the end, whatever the size
	}
	switch {
	case offset == 0 && length == -1:
		// The whole object: no Range header, which also works for empty objects.
	case length == -1:
		in.Range = aws.String(fmt.Sprintf("bytes=%d-", offset))
	default:
		in.Range = aws.String(fmt.Sprintf("bytes=%d-%d", offset, offset+length-1))
	}
	w := s.watch(ctx)
	out, err := s.client.GetObject(w.ctx, in)
	if err != nil {
		w.stop()
		err = s.mapErr(ctx, w, "get", key, err)
		if errors.Is(err, objectstore.ErrInvalidRange) {
			// 416: the range starts at or after the end. At the end is a valid empty read.
			return s.emptyRange(ctx, key, offset, err)
		}
		return nil, err
	}
	if in.Range != nil {
		// A server that ignored the Range header would hand us the wrong bytes.
		cr := aws.ToString(out.ContentRange)
		var start, end, total int64
		if _, err := fmt.Sscanf(cr, "bytes %d-%d/%d", &start, &end, &total); err != nil || start != offset {
			out.Body.Close()
			w.stop()
			return nil, wrap("get", key, fmt.Errorf("asked for %s, server answered Content-Range %q", *in.Range, cr))
		}
	}
	return &body{s: s, ctx: ctx, key: key, rc: out.Body, w: w}, nil
}

// emptyRange answers a zero-byte read at offset: fine if offset <= size, else
// ErrInvalidRange (rangeErr, when the server already said so).
func (s *Store) emptyRange(ctx context.Context, key string, offset int64, rangeErr error) (io.ReadCloser, error) {
	info, err := s.Head(ctx, key)
	if err != nil {
		return nil, err
	}
	if offset > info.Size || rangeErr != nil && offset != info.Size {
		if rangeErr != nil {
			return nil, rangeErr
		}
		return nil, wrap("get", key, fmt.Errorf("offset %d beyond size %d: %w", offset, info.Size, objectstore.ErrInvalidRange))
	}
	return io.NopCloser(bytes.NewReader(nil)), nil
}

// body is a GET response body: reads keep the watchdog quiet, errors are mapped.
type body struct {
	s   *Store
	ctx context.Context
	key string
	rc  io.ReadCloser
	w   *watchdog
}

func (b *body) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	if n > 0 {
		b.w.poke()
	}
	if err != nil && err != io.EOF {
		if cerr := b.ctx.Err(); cerr != nil {
			return n, wrap("get", b.key, cerr)
		}
		if b.w.stalled() {
			return n, wrap("get", b.key, fmt.Errorf("%w: body stalled for %s: %v", objectstore.ErrUnavailable, b.s.timeout, err))
		}
		// A body that breaks off is a transport failure whatever the cause.
		return n, wrap("get", b.key, fmt.Errorf("%w: reading body: %w", objectstore.ErrUnavailable, err))
	}
	return n, err
}

func (b *body) Close() error {
	err := b.rc.Close()
	b.w.stop()
	return err
}

// Head implements objectstore.Store.
func (s *Store) Head(ctx context.Context, key string) (objectstore.ObjectInfo, error) {
	if err := objectstore.ValidateKey(key); err != nil {
		return objectstore.ObjectInfo{}, wrap("head", key, err)
	}
	if err := ctx.Err(); err != nil {
		return objectstore.ObjectInfo{}, wrap("head", key, err)
	}
	w := s.watch(ctx)
	defer w.stop()
	out, err := s.client.HeadObject(w.ctx, &s3sdk.HeadObjectInput{Bucket: &s.bucket, Key: aws.String(s.prefix + key)})
	if err != nil {
		return objectstore.ObjectInfo{}, s.mapErr(ctx, w, "head", key, err)
	}
	return objectstore.ObjectInfo{Key: key, Size: aws.ToInt64(out.ContentLength), LastModified: aws.ToTime(out.LastModified)}, nil
}

// Delete implements objectstore.Store.
func (s *Store) Delete(ctx context.Context, key string) error {
	if err := objectstore.ValidateKey(key); err != nil {
		return wrap("delete", key, err)
	}
	if err := ctx.Err(); err != nil {
		return wrap("delete", key, err)
	}
	w := s.watch(ctx)
	defer w.stop()
	_, err := s.client.DeleteObject(w.ctx, &s3sdk.DeleteObjectInput{Bucket: &s.bucket, Key: aws.String(s.prefix + key)})
	err = s.mapErr(ctx, w, "delete", key, err)
	if errors.Is(err, objectstore.ErrNotFound) {
		return nil // S3 answers 204 anyway; some compatible servers say 404
	}
	return err
}

// List implements objectstore.Store.
func (s *Store) List(ctx context.Context, prefix string) ([]objectstore.ObjectInfo, error) {
	if err := objectstore.ValidatePrefix(prefix); err != nil {
		return nil, wrap("list", prefix, err)
	}
	if err := ctx.Err(); err != nil {
		return nil, wrap("list", prefix, err)
	}
	p := s3sdk.NewListObjectsV2Paginator(s.client, &s3sdk.ListObjectsV2Input{
		Bucket:  &s.bucket,
		Prefix:  aws.String(s.prefix + prefix),
		MaxKeys: aws.Int32(s.page),
	})
	var out []objectstore.ObjectInfo
	for p.HasMorePages() {
		w := s.watch(ctx)
		page, err := p.NextPage(w.ctx)
		w.stop()
		if err != nil {
			return nil, s.mapErr(ctx, w, "list", prefix, err)
		}
		for _, o := range page.Contents {
			k := strings.TrimPrefix(aws.ToString(o.Key), s.prefix)
			out = append(out, objectstore.ObjectInfo{Key: k, Size: aws.ToInt64(o.Size), LastModified: aws.ToTime(o.LastModified)})
		}
	}
	slices.SortFunc(out, func(a, b objectstore.ObjectInfo) int { return strings.Compare(a.Key, b.Key) })
	return out, nil
}

func wrap(op, key string, err error) error {
	return fmt.Errorf("objectstore/s3: %s %q: %w", op, key, err)
}

// mapErr turns an SDK error into one that wraps the right sentinel (see the package
// doc). ctx is the caller's context, w the request's watchdog.
func (s *Store) mapErr(ctx context.Context, w *watchdog, op, key string, err error) error {
	if err == nil {
		return nil
	}
	if cerr := ctx.Err(); cerr != nil {
		return wrap(op, key, fmt.Errorf("%w (%v)", cerr, err))
	}
	if w != nil && w.stalled() {
		// %v: the SDK's error says "context canceled", which is not the caller's.
		return wrap(op, key, fmt.Errorf("%w: no progress for %s: %v", objectstore.ErrUnavailable, s.timeout, err))
	}
	if sentinel := Classify(err); sentinel != nil {
		return wrap(op, key, fmt.Errorf("%w: %w", sentinel, err))
	}
	return wrap(op, key, err)
}

// Classify returns the objectstore sentinel an SDK (or transport) error maps to, or nil
// for errors that no retry will fix (configuration, permissions, a missing bucket).
// The caller's context is not considered here.
func Classify(err error) error {
	var code string
	var ae smithy.APIError
	if errors.As(err, &ae) {
		code = ae.ErrorCode()
	}
	status := 0
	var re *smithyhttp.ResponseError
	if errors.As(err, &re) {
		status = re.HTTPStatusCode()
	}
	switch code {
	case "NoSuchBucket":
		return nil
	case "NoSuchKey", "NotFound":
		return objectstore.ErrNotFound
	case "InvalidRange":
		return objectstore.ErrInvalidRange
	case "BadDigest", "InvalidDigest":
		// The body that arrived is not the one whose Content-MD5 was sent.
		return objectstore.ErrMismatch
	case "SlowDown", "Throttling", "ThrottlingException", "TooManyRequests", "RequestLimitExceeded", "TooManyRequestsException":
		return objectstore.ErrThrottled
	case "InternalError", "ServiceUnavailable", "RequestTimeout":
		if status == http.StatusServiceUnavailable {
			return objectstore.ErrThrottled
		}
		return objectstore.ErrUnavailable
	}
	switch {
	case status == http.StatusNotFound:
		return objectstore.ErrNotFound
	case status == http.StatusRequestedRangeNotSatisfiable:
		return objectstore.ErrInvalidRange
	case status == http.StatusServiceUnavailable, status == http.StatusTooManyRequests:
		return objectstore.ErrThrottled
	case status >= 500:
		return objectstore.ErrUnavailable
	case status >= 300:
		return nil // another 4xx (or a redirect, which is a wrong endpoint or region)
	}
	// No error status: a transport failure before any answer, or an answer cut off
	// while being read (the SDK reports those with the status it got, often 200).
	var sendErr *smithyhttp.RequestSendError
	var netErr net.Error
	var timeoutErr *awshttp.ResponseTimeoutError
	switch {
	case errors.As(err, &sendErr), errors.As(err, &netErr), errors.As(err, &timeoutErr),
		errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF),
		errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.ECONNREFUSED),
		errors.Is(err, syscall.ECONNABORTED), errors.Is(err, syscall.EPIPE):
		return objectstore.ErrUnavailable
	}
	return nil
}

// errStalled is the cancellation cause of a request whose watchdog fired.
var errStalled = errors.New("objectstore/s3: request made no progress")

// watchdog cancels a request that makes no progress for the store's timeout: no
// response yet, or no body bytes moving. Progress (poke) is an atomic store; the timer
// re-arms itself for the time left.
type watchdog struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
	d      time.Duration
	last   atomic.Int64 // UnixNano of the last progress

	mu      sync.Mutex
	timer   *time.Timer
	stopped bool
}

func (s *Store) watch(parent context.Context) *watchdog {
	ctx, cancel := context.WithCancelCause(parent)
	w := &watchdog{ctx: ctx, cancel: cancel, d: s.timeout}
	w.last.Store(time.Now().UnixNano())
	w.mu.Lock()
	w.timer = time.AfterFunc(s.timeout, w.fire)
	w.mu.Unlock()
	return w
}

func (w *watchdog) fire() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopped {
		return
	}
	idle := time.Duration(time.Now().UnixNano() - w.last.Load())
	if idle >= w.d {
		w.cancel(errStalled)
		return
	}
	w.timer.Reset(w.d - idle)
}

func (w *watchdog) poke() { w.last.Store(time.Now().UnixNano()) }

func (w *watchdog) stalled() bool { return context.Cause(w.ctx) == errStalled }

func (w *watchdog) stop() {
	w.mu.Lock()
	w.stopped = true
	w.timer.Stop()
	w.mu.Unlock()
	w.cancel(context.Canceled)
}

// progressSeeker is a PUT body: every read is progress.
type progressSeeker struct {
	rs io.ReadSeeker
	w  *watchdog
}

func (p *progressSeeker) Read(b []byte) (int, error) {
	n, err := p.rs.Read(b)
	p.w.poke()
	return n, err
}

func (p *progressSeeker) Seek(off int64, whence int) (int64, error) {
	p.w.poke()
	return p.rs.Seek(off, whence)
}

type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c *ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}
