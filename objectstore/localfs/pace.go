package localfs

import (
	"io"
	"os"
)

// paceStep is how much of an object is written before it is written back. Objects are
// megabytes (8 MiB by default) and usually sit on the same disk as a broker's WAL: one
// fsync at the end would put the whole object in the device queue at once, and every
// group commit's fdatasync issued meanwhile waits behind it (20-40 ms per object on
// this project's test machines). Writing back step by step keeps at most one step
// queued; the total work is the same.
const paceStep = 512 << 10

// pacedCopy copies r to f, handing every paceStep written to wb (sysfile.WriteBack).
func pacedCopy(f *os.File, r io.Reader, wb func(f *os.File, off, n int64) error) (int64, error) {
	buf := make([]byte, 64<<10)
	var n, synced int64
	for {
		k, rerr := r.Read(buf)
		if k > 0 {
			if _, err := f.Write(buf[:k]); err != nil {
				return n, err
			}
			n += int64(k)
			if wb != nil && n-synced >= paceStep {
				if wb(f, synced, n-synced) != nil {
					// Pacing only (a file system without sync_file_range): Put's
					// fsync still reports any real write error.
					wb = nil
				}
				synced = n
			}
		}
		if rerr == io.EOF {
			return n, nil
		}
		if rerr != nil {
			return n, rerr
		}
	}
}
